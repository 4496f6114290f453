export { copyTable, CopyTablePayload } from "./CopyTable.js"
