/** Discovery's masking suggestions by column name (pure). */
import { describe, expect, it } from "vitest"
import { maskingSuggestion } from "../src/index.js"

describe("maskingSuggestion", () => {
  it("suggests by name for text columns, first pattern wins", () => {
    expect(maskingSuggestion("email", "text", false)).toBe("email")
    expect(maskingSuggestion("Customer_Email", "character varying(200)", true)).toBe("email")
    expect(maskingSuggestion("password_hash", "text", false)).toBe("redact")
    expect(maskingSuggestion("api_key", "character(40)", false)).toBe("redact")
    expect(maskingSuggestion("phone", "text", true)).toBe("hash")
    expect(maskingSuggestion("last_name", "citext", true)).toBe("hash")
    expect(maskingSuggestion("address_line2", "text", true)).toBe("hash")
  })

  it("says nothing for names that are not personal data, or types no deterministic method keeps", () => {
    expect(maskingSuggestion("name", "text", false)).toBeNull()
    expect(maskingSuggestion("product_title", "text", false)).toBeNull()
    expect(maskingSuggestion("email_verified", "boolean", false)).toBeNull()
    expect(maskingSuggestion("phone_count", "integer", true)).toBeNull()
    expect(maskingSuggestion("zipper_color", "text", true)).toBeNull()
  })

  it("nulls a nullable birth date that is not text; a NOT NULL one gets no suggestion", () => {
    expect(maskingSuggestion("date_of_birth", "date", true)).toBe("null")
    expect(maskingSuggestion("dob", "date", false)).toBeNull()
  })
})
