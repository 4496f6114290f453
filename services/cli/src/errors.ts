import { Schema } from "effect"

/** A command used the wrong way (a missing org, conflicting options): exit code 2. */
export class UsageError extends Schema.TaggedError<UsageError>()("UsageError", { message: Schema.String }) {}

/** No token from --token, SCION_TOKEN or `scion login`: exit code 3. */
export class NotLoggedIn extends Schema.TaggedError<NotLoggedIn>()("NotLoggedIn", {}) {
  override get message() {
    return "not logged in: run `scion login`, or set SCION_TOKEN (an org API key) or pass --token"
  }
}

/** The preflight report was printed; exit code 1 says a check failed. */
export class PreflightFailed extends Schema.TaggedError<PreflightFailed>()("PreflightFailed", {}) {
  override get message() {
    return "preflight did not pass"
  }
}

/** No branch of that name on the connector: exit code 4, like the API's 404. */
export class BranchNotFound extends Schema.TaggedError<BranchNotFound>()("BranchNotFound", { message: Schema.String }) {}
