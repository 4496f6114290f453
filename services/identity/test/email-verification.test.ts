import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { Accounts, Auth, Invites, MailRecorder } from "../src/index.js"
import { createOrg, identityTestLayer, signUp } from "./support.js"

const tokenIn = (text: string) => text.match(/scion_ver_[A-Za-z0-9_-]+/)?.[0] ?? ""

describe("email verification", () => {
  layer(identityTestLayer({ EMBEDDED_AUTO_VERIFY_EMAIL: "false" }), { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("mails a token that verifies the email once", () =>
      Effect.gen(function* () {
        const auth = yield* Auth
        const accounts = yield* Accounts
        const mail = yield* MailRecorder
        const invites = yield* Invites
        const me = yield* signUp("verify")
        expect(me.user.emailVerified).toBe(false)
        const message = (yield* mail.sent).find((m) => m.to === me.email)
        expect(message?.subject).toContain("Verify")
        const token = tokenIn(message?.text ?? "")
        expect(token).not.toBe("")

        expect(yield* Effect.flip(auth.verifyEmail("scion_ver_unknown"))).toMatchObject({ _tag: "InvalidVerificationToken" })
        const verified = yield* auth.verifyEmail(token)
        expect(verified).toMatchObject({ id: me.userId, emailVerified: true })
        expect((yield* accounts.getMe(me.principal)).user.emailVerified).toBe(true)
        expect(yield* Effect.flip(auth.verifyEmail(token))).toMatchObject({ _tag: "InvalidVerificationToken" })

        // Verified now, the invitee can see and accept invites.
        const owner = yield* signUp("owner")
        const org = yield* createOrg(owner.principal)
        const invite = yield* invites.createInvite(owner.principal, { orgId: org.orgId, email: me.email, roleKey: "member" })
        expect((yield* invites.listPendingInvites(me.principal)).map((i) => i.id)).toEqual([invite.id])
        expect((yield* invites.acceptInvite(me.principal, invite.token ?? "")).org.myRole).toBe("member")
      })
    )
  })
})
