export * from "./errors";
export * from "./validate";
export * from "./cursor";
export * from "./middleware";
export * from "./metrics";
export * from "./health";
export * from "./service-app";
export * from "./json-routes";
