// ESLint for the workspace: typescript-eslint's recommended rules; the Effect language service
// (tsconfig plugin) adds Effect-specific diagnostics in editors and `effect-language-service`.
import tseslint from "typescript-eslint"

export default tseslint.config(
  { ignores: ["**/dist/**", "proto/gen/**", "**/node_modules/**", ".scion/**"] },
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }]
    }
  },
  {
    // The gateway's bundle: the @effect/platform barrel makes esbuild keep every module it
    // re-exports in the startup chunk, the 3.4 MB docs page script included (gateway/src/Docs.ts).
    files: ["gateway/src/**/*.ts", "services/kit/src/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", { paths: [{ name: "@effect/platform", message: "Import the module's subpath (@effect/platform/HttpApiBuilder): the barrel keeps the docs page in the gateway's startup chunk." }] }]
    }
  }
)
