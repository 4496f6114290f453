import { Effect } from "effect"
import { InvalidArgument } from "./errors.js"

/** Trimmed text of 1..max characters, else INVALID_ARGUMENT naming the field. */
export const boundedText = (field: string, value: string, max = 100): Effect.Effect<string, InvalidArgument> => {
  const trimmed = value.trim()
  return trimmed.length >= 1 && trimmed.length <= max
    ? Effect.succeed(trimmed)
    : Effect.fail(new InvalidArgument({ field, message: `${field} must be 1 to ${max} characters` }))
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/

/** Trimmed, lower-cased email address. */
export const normalizeEmail = (value: string): Effect.Effect<string, InvalidArgument> => {
  const email = value.trim().toLowerCase()
  return email.length <= 254 && EMAIL.test(email)
    ? Effect.succeed(email)
    : Effect.fail(new InvalidArgument({ field: "email", message: "email must be a valid email address" }))
}

export const MIN_PASSWORD_LENGTH = 8
export const MAX_PASSWORD_LENGTH = 256

export const checkPassword = (password: string): Effect.Effect<string, InvalidArgument> =>
  password.length >= MIN_PASSWORD_LENGTH && password.length <= MAX_PASSWORD_LENGTH
    ? Effect.succeed(password)
    : Effect.fail(
        new InvalidArgument({ field: "password", message: `password must be ${MIN_PASSWORD_LENGTH} to ${MAX_PASSWORD_LENGTH} characters` })
      )
