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
  }
)
