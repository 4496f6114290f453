/**
 * Scion's TypeScript SDK: the gateway's own API definition as a typed client (every endpoint,
 * grouped as the API is), the operation helpers clients need, and a plain-Promise face.
 */
export { type ApiClient, DEFAULT_BASE_URL, makeApiClient, ScionApi, type ScionOptions } from "./client.js"
export {
  branchOf,
  BranchUrlMissing,
  createBranch,
  type CreateBranchOptions,
  type CreateBranchRequest,
  type CreatedBranch,
  type Operation,
  OperationFailed,
  OperationTimedOut,
  waitForOperation,
  type WaitOptions
} from "./operations.js"
export { createScion, type Scion, ScionError } from "./promise.js"
