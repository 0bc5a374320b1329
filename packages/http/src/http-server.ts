import { createServer, maxHeaderSize, STATUS_CODES, type IncomingMessage, type RequestListener, type Server, type ServerOptions, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { ErrorCode } from "@platform/contracts";
import { ApiError, type ErrorDetail } from "./errors";

type ClientError = Error & { code?: string };
type Refusal = { code: ErrorCode; message: string; details?: ErrorDetail[] };

const JSON_TYPE = "application/json; charset=utf-8";
/** `http(s)://authority` and then the path with its query (or nothing), of an absolute-form request target. */
const ABSOLUTE_FORM = /^https?:\/\/[^/?#]*([^#]*)/i;

/**
 * The platform's `node:http` server (the gateway's and every service's). node:http refuses some requests before any
 * handler sees them and answers with a bare status line and no body; here they get the error envelope like every
 * other 4xx (contract: errors), with the status the contract pairs with the code (ADR 0024: not HTTP's 431, 408 or
 * 417, which the contract's table does not have); the connection of a request node could not read is closed:
 * - request line and headers over `maxHeaderSize` (16 KB): 413 `PAYLOAD_TOO_LARGE`;
 * - bytes that are not HTTP/1.1 (also a body length given twice): 400 `VALIDATION_ERROR` at `request`;
 * - headers not received within `headersTimeout`: 400 `VALIDATION_ERROR` at `request`;
 * - an HTTP/1.1 request without `Host` (RFC 9112 requires 400): 400 `VALIDATION_ERROR` at `headers.host`;
 * - an `Expect` other than `100-continue`: 400 `VALIDATION_ERROR` at `headers.expect`;
 * - `CONNECT` (node drops the connection without a word): 404 `NOT_FOUND`, as any method no route serves;
 * - a request target in absolute form (`http://host/path`) is routed by its path and query, as RFC 9112 requires.
 * A connection that is already reset or no longer writable is destroyed, as node does.
 */
export function createHttpServer(listener: RequestListener, options: ServerOptions = {}): Server {
  let draining = false;
  const server = createServer({ ...options, requireHostHeader: false }, (req, res) => {
    // Stopping: the connection closes once this answer is out, so a keep-alive client moves on (see drainHttpServer).
    if (draining) {
      res.setHeader("Connection", "close");
      res.once("finish", () => req.socket.end());
    }
    // The absolute form of the request target (`POST http://host/api/v1/messages`), which RFC 9112 (3.2.2) has every
    // server accept: routed by its path and query, as the origin form is.
    const target = req.url;
    if (target !== undefined && target.charCodeAt(0) !== 47 /* "/" */ && target !== "*") {
      const absolute = ABSOLUTE_FORM.exec(target);
      if (absolute) req.url = absolute[1].startsWith("/") ? absolute[1] : `/${absolute[1]}`;
    }
    if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor === 1) {
      refuse(res, { code: "VALIDATION_ERROR", message: "An HTTP/1.1 request needs a Host header", details: [{ path: "headers.host", message: "required" }] });
      return;
    }
    listener(req, res);
  });
  server.on("checkExpectation", (_req: IncomingMessage, res: ServerResponse) => {
    refuse(res, { code: "VALIDATION_ERROR", message: "Only Expect: 100-continue is supported", details: [{ path: "headers.expect", message: "must be 100-continue" }] });
  });
  server.on("connect", (req: IncomingMessage, socket: Duplex) => {
    answerOnSocket(socket, { code: "NOT_FOUND", message: `No route for CONNECT ${req.url ?? ""}`.slice(0, 200) });
  });
  server.on("clientError", (err: ClientError, socket: Duplex) => {
    if (err.code === "ECONNRESET" || !socket.writable) {
      socket.destroy();
      return;
    }
    answerOnSocket(socket, refusalOf(err, options.maxHeaderSize ?? maxHeaderSize));
  });
  startDraining.set(server, () => (draining = true));
  return server;
}

const startDraining = new WeakMap<Server, () => void>();
/** How often a draining server closes the connections that wait idle between two requests. */
const IDLE_SWEEP_MS = 50;

/**
 * Stops a server made by `createHttpServer` the way a pod is drained: no new connection, every request already
 * received (or still arriving on an open connection) answered, each connection closed after its answer (with
 * `Connection: close`) or as soon as it is idle. Resolves once the last connection is gone. `server.close()` alone
 * leaves keep-alive connections open for as long as their client keeps them busy: under steady load a stopping
 * service answered for as long as it was let live and was then killed with requests in flight.
 */
export function drainHttpServer(server: Server): Promise<void> {
  startDraining.get(server)?.();
  return new Promise<void>((resolve) => {
    const sweep = setInterval(() => server.closeIdleConnections(), IDLE_SWEEP_MS);
    server.close(() => {
      clearInterval(sweep);
      resolve();
    });
    server.closeIdleConnections();
  });
}

function refusalOf(err: ClientError, headerLimit: number): Refusal {
  if (err.code === "HPE_HEADER_OVERFLOW") {
    return { code: "PAYLOAD_TOO_LARGE", message: `The request line and headers are over ${headerLimit / 1024} KB` };
  }
  if (err.code === "ERR_HTTP_REQUEST_TIMEOUT") {
    const { code, message, details } = ApiError.notReceivedInTime();
    return { code, message, details };
  }
  return { code: "VALIDATION_ERROR", message: "The request is not valid HTTP/1.1", details: [{ path: "request", message: "not valid HTTP/1.1" }] };
}

/** The refusal as `ApiError` answers it: the contract's status for its code, and the envelope. */
function answerOf(r: Refusal): { status: number; body: string } {
  const error = new ApiError(r.code, r.message, r.details);
  return { status: error.status, body: JSON.stringify(error.toJSON()) };
}

function refuse(res: ServerResponse, r: Refusal): void {
  const { status, body } = answerOf(r);
  // The connection stays as the request asked: node reads and drops an unread body before the next request.
  res.writeHead(status, { "Content-Type": JSON_TYPE, "Content-Length": Buffer.byteLength(body) }).end(body);
}

/** Before node has a request object (or after it gave the socket up): the answer written on the socket itself. */
function answerOnSocket(socket: Duplex, r: Refusal): void {
  const { status, body } = answerOf(r);
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: ${JSON_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}
