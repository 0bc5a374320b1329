export * from "./errors";
export * from "./phone";
export * from "./common";
export * from "./api";
export * from "./admin";
export * from "./events";
export * from "./subjects";
export * from "./openapi";
