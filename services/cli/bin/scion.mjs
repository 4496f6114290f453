#!/usr/bin/env node
// The installed entry point: the compiled CLI (npm start / npm test build it; `npm run setup` too).
import "../dist/main.js"
