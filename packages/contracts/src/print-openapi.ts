import { buildOpenApiDocument } from "./openapi";

process.stdout.write(JSON.stringify(buildOpenApiDocument(), null, 2) + "\n");
