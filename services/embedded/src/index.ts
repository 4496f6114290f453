export { EmbeddedPostgresLive, MetadataDatabase } from "./EmbeddedPostgres.js"
