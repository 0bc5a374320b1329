import { maxHeaderSize, STATUS_CODES, type Server } from "node:http";
import type { Duplex } from "node:stream";
import type { ErrorCode } from "@platform/contracts";
import type { ErrorDetail } from "./errors";

type ClientError = Error & { code?: string };

/**
 * node:http refuses a request it cannot read before any handler sees it, and by default answers with a bare status
 * line and no body: 431 when the request line and headers together are over `maxHeaderSize` (16 KB), 400 when the
 * bytes are not HTTP/1.1, 408 when a request is not received whole within `requestTimeout`. Those answers get the
 * error envelope here, like every other 4xx (contract: errors), and the connection is closed, as node does:
 * - 431 `PAYLOAD_TOO_LARGE` (the status is HTTP's for headers; the code is the contract's for a request too large);
 * - 400 `VALIDATION_ERROR`, details at `request`;
 * - 408 `VALIDATION_ERROR`, details at `request`.
 * A connection that is already reset or no longer writable is destroyed, as node does.
 */
export function answerUnreadableRequests(server: Server): Server {
  server.on("clientError", (err: ClientError, socket: Duplex) => {
    if (err.code === "ECONNRESET" || !socket.writable) {
      socket.destroy();
      return;
    }
    const [status, code, message, details] = refusal(err);
    const body = JSON.stringify({ error: { code, message, ...(details ? { details } : {}) } });
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
  return server;
}

function refusal(err: ClientError): [number, ErrorCode, string, ErrorDetail[]?] {
  if (err.code === "HPE_HEADER_OVERFLOW") {
    return [431, "PAYLOAD_TOO_LARGE", `The request line and headers are over ${maxHeaderSize / 1024} KB`];
  }
  if (err.code === "ERR_HTTP_REQUEST_TIMEOUT") {
    const details = [{ path: "request", message: "not received whole in time" }];
    return [408, "VALIDATION_ERROR", "The request was not received in time", details];
  }
  return [400, "VALIDATION_ERROR", "The request is not valid HTTP/1.1", [{ path: "request", message: "not valid HTTP/1.1" }]];
}
