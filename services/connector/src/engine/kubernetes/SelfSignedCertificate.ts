import { generateKeyPairSync, randomBytes, sign } from "node:crypto"
import { Redacted } from "effect"

/**
 * A self-signed EC P-256 server certificate for a Kubernetes engine, DER-encoded here (node:crypto
 * signs; it cannot issue X.509 certificates): no openssl in the connector's image, no
 * cert-manager in the cluster.
 */

const der = (tag: number, content: Buffer): Buffer => {
  const n = content.length
  const length =
    n < 0x80
      ? Buffer.from([n])
      : (() => {
          const bytes: Array<number> = []
          for (let rest = n; rest > 0; rest = Math.floor(rest / 256)) bytes.unshift(rest % 256)
          return Buffer.from([0x80 | bytes.length, ...bytes])
        })()
  return Buffer.concat([Buffer.from([tag]), length, content])
}
const seq = (...items: ReadonlyArray<Buffer>) => der(0x30, Buffer.concat(items))
const set = (...items: ReadonlyArray<Buffer>) => der(0x31, Buffer.concat(items))
const oid = (dotted: string) => {
  const [a = 0, b = 0, ...rest] = dotted.split(".").map(Number)
  const bytes = [40 * a + b]
  for (const arc of rest) {
    const chunk = [arc & 0x7f]
    for (let v = Math.floor(arc / 128); v > 0; v = Math.floor(v / 128)) chunk.unshift((v & 0x7f) | 0x80)
    bytes.push(...chunk)
  }
  return der(0x06, Buffer.from(bytes))
}
const integer = (value: Buffer) => {
  let i = 0
  while (i < value.length - 1 && value[i] === 0) i++
  const trimmed = value.subarray(i)
  return der(0x02, (trimmed[0] ?? 0) & 0x80 ? Buffer.concat([Buffer.from([0]), trimmed]) : trimmed)
}
const time = (date: Date) => {
  const iso = date.toISOString().replace(/[-:T]/g, "").slice(0, 14) + "Z"
  return date.getUTCFullYear() < 2050 ? der(0x17, Buffer.from(iso.slice(2), "ascii")) : der(0x18, Buffer.from(iso, "ascii"))
}
const ECDSA_WITH_SHA256 = seq(oid("1.2.840.10045.4.3.2"))

export interface TlsMaterial {
  /** PEM certificate (self-signed: it is its own CA). */
  readonly certificate: string
  /** PEM PKCS#8 private key. */
  readonly key: Redacted.Redacted<string>
}

/** A self-signed EC P-256 server certificate for `dnsNames` (SAN), valid 10 years. */
export const selfSignedCertificate = (commonName: string, dnsNames: ReadonlyArray<string>, now = new Date()): TlsMaterial => {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" })
  const name = seq(set(seq(oid("2.5.4.3"), der(0x0c, Buffer.from(commonName, "utf8")))))
  const serial = randomBytes(16)
  serial[0] = (serial[0] ?? 0) & 0x7f
  const notBefore = new Date(now.getTime() - 60 * 60 * 1000)
  const notAfter = new Date(now.getTime() + 3650 * 24 * 60 * 60 * 1000)
  const extensions = seq(
    // subjectAltName
    seq(oid("2.5.29.17"), der(0x04, seq(...dnsNames.map((dns) => der(0x82, Buffer.from(dns, "ascii")))))),
    // keyUsage (critical): digitalSignature, keyCertSign (it signs itself)
    seq(oid("2.5.29.15"), der(0x01, Buffer.from([0xff])), der(0x04, der(0x03, Buffer.from([0x02, 0x84])))),
    // extKeyUsage: serverAuth
    seq(oid("2.5.29.37"), der(0x04, seq(oid("1.3.6.1.5.5.7.3.1"))))
  )
  const tbs = seq(
    der(0xa0, integer(Buffer.from([2]))),
    integer(serial),
    ECDSA_WITH_SHA256,
    name,
    seq(time(notBefore), time(notAfter)),
    name,
    publicKey.export({ type: "spki", format: "der" }),
    der(0xa3, extensions)
  )
  const signature = sign("sha256", tbs, { key: privateKey, dsaEncoding: "der" })
  const certificate = seq(tbs, ECDSA_WITH_SHA256, der(0x03, Buffer.concat([Buffer.from([0]), signature])))
  const body = certificate.toString("base64").replace(/(.{64})/g, "$1\n").replace(/\n$/, "")
  return {
    certificate: `-----BEGIN CERTIFICATE-----\n${body}\n-----END CERTIFICATE-----\n`,
    key: Redacted.make(privateKey.export({ type: "pkcs8", format: "pem" }).toString())
  }
}

