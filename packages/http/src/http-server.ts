import { createServer, maxHeaderSize, STATUS_CODES, type IncomingMessage, type RequestListener, type Server, type ServerOptions, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { ErrorCode } from "@platform/contracts";
import { ApiError, type ErrorDetail } from "./errors";

type ClientError = Error & { code?: string };
type Refusal = { status: number; code: ErrorCode; message: string; details?: ErrorDetail[] };

const JSON_TYPE = "application/json; charset=utf-8";

/**
 * The platform's `node:http` server (the gateway's and every service's). node:http refuses some requests before any
 * handler sees them and answers with a bare status line and no body; here they get the error envelope like every
 * other 4xx (contract: errors); the connection of a request node could not read is closed:
 * - request line and headers over `maxHeaderSize` (16 KB): 431 `PAYLOAD_TOO_LARGE` (HTTP's status for headers, the
 *   contract's code for a request too large);
 * - bytes that are not HTTP/1.1 (also a body length given twice): 400 `VALIDATION_ERROR` at `request`;
 * - headers not received within `headersTimeout`: 408 `VALIDATION_ERROR` at `request`;
 * - an HTTP/1.1 request without `Host` (RFC 9112 requires 400): 400 `VALIDATION_ERROR` at `headers.host`;
 * - an `Expect` other than `100-continue`: 417 `VALIDATION_ERROR` at `headers.expect`;
 * - `CONNECT` (node drops the connection without a word): 404 `NOT_FOUND`, as any method no route serves.
 * A connection that is already reset or no longer writable is destroyed, as node does.
 */
export function createHttpServer(listener: RequestListener, options: ServerOptions = {}): Server {
  const server = createServer({ ...options, requireHostHeader: false }, (req, res) => {
    if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor === 1) {
      refuse(res, { status: 400, code: "VALIDATION_ERROR", message: "An HTTP/1.1 request needs a Host header", details: [{ path: "headers.host", message: "required" }] });
      return;
    }
    listener(req, res);
  });
  server.on("checkExpectation", (_req: IncomingMessage, res: ServerResponse) => {
    refuse(res, { status: 417, code: "VALIDATION_ERROR", message: "Only Expect: 100-continue is supported", details: [{ path: "headers.expect", message: "must be 100-continue" }] });
  });
  server.on("connect", (req: IncomingMessage, socket: Duplex) => {
    answerOnSocket(socket, { status: 404, code: "NOT_FOUND", message: `No route for CONNECT ${req.url ?? ""}`.slice(0, 200) });
  });
  server.on("clientError", (err: ClientError, socket: Duplex) => {
    if (err.code === "ECONNRESET" || !socket.writable) {
      socket.destroy();
      return;
    }
    answerOnSocket(socket, refusalOf(err, options.maxHeaderSize ?? maxHeaderSize));
  });
  return server;
}

function refusalOf(err: ClientError, headerLimit: number): Refusal {
  if (err.code === "HPE_HEADER_OVERFLOW") {
    return { status: 431, code: "PAYLOAD_TOO_LARGE", message: `The request line and headers are over ${headerLimit / 1024} KB` };
  }
  if (err.code === "ERR_HTTP_REQUEST_TIMEOUT") {
    const { code, message, details } = ApiError.notReceivedInTime();
    return { status: 408, code, message, details };
  }
  return { status: 400, code: "VALIDATION_ERROR", message: "The request is not valid HTTP/1.1", details: [{ path: "request", message: "not valid HTTP/1.1" }] };
}

/** The envelope as `ApiError` writes it; the status is HTTP's for the case, which may differ from the code's usual one. */
const bodyOf = (r: Refusal) => JSON.stringify(new ApiError(r.code, r.message, r.details).toJSON());

function refuse(res: ServerResponse, r: Refusal): void {
  const body = bodyOf(r);
  // The connection stays as the request asked: node reads and drops an unread body before the next request.
  res.writeHead(r.status, { "Content-Type": JSON_TYPE, "Content-Length": Buffer.byteLength(body) }).end(body);
}

/** Before node has a request object (or after it gave the socket up): the answer written on the socket itself. */
function answerOnSocket(socket: Duplex, r: Refusal): void {
  const body = bodyOf(r);
  socket.end(`HTTP/1.1 ${r.status} ${STATUS_CODES[r.status]}\r\nContent-Type: ${JSON_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}
