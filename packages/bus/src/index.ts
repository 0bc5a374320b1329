export * from "./bus";
export * from "./errors";
export * from "./outbox";
