/**
 * SSRF guard of webhook targets. A URL must be `https:` and every address its
 * host resolves to must be public unicast: loopback, private, link-local,
 * unique-local, carrier-grade NAT, reserved, multicast, cloud metadata and
 * IPv4 addresses hidden in IPv6 (mapped, 6to4, NAT64…) are refused. The check
 * runs at creation and again at each delivery, on the addresses the socket is
 * about to connect to and on the one it did connect to, so a DNS answer that
 * changes after creation (rebinding) cannot reach an internal address.
 * `WEBHOOK_ALLOW_PRIVATE_TARGETS=true` turns all of it off (development, tests).
 */
import dns from "node:dns";
import net from "node:net";
import { blockedAddressReason, nonPublicHostReason } from "@platform/contracts";

export { blockedAddressReason };

export class BlockedTargetError extends Error {
  readonly code = "EBLOCKEDTARGET";
  constructor(message: string) {
    super(message);
    this.name = "BlockedTargetError";
  }
}

export type UrlCheck = { ok: true; url: URL } | { ok: false; message: string };

function hostOf(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, "");
}

/** Syntax and scheme rules, no DNS. */
export function checkUrlShape(raw: string, allowPrivate: boolean): UrlCheck {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, message: "must be an absolute URL" };
  }
  if (url.protocol !== "https:" && !(allowPrivate && url.protocol === "http:")) {
    return { ok: false, message: allowPrivate ? "must be an http: or https: URL" : "must be an https: URL" };
  }
  if (url.username || url.password) return { ok: false, message: "must not contain credentials" };
  if (!url.hostname) return { ok: false, message: "must have a host" };
  if (allowPrivate) return { ok: true, url };
  const reason = nonPublicHostReason(url.hostname);
  return reason ? { ok: false, message: `must not point to ${reason}` } : { ok: true, url };
}

/**
 * Creation-time check: shape, then every address the host resolves to now.
 * A name that does not resolve (yet) is accepted: the delivery-time check on
 * the connected address is the one that cannot be fooled, and it refuses.
 */
export async function checkTargetUrl(raw: string, allowPrivate: boolean): Promise<UrlCheck> {
  const shape = checkUrlShape(raw, allowPrivate);
  if (!shape.ok || allowPrivate) return shape;
  const host = hostOf(shape.url);
  if (net.isIP(host)) return shape;
  let addresses: dns.LookupAddress[];
  try {
    addresses = await withTimeout(dns.promises.lookup(host, { all: true, verbatim: true }), 3_000);
  } catch {
    return shape;
  }
  for (const a of addresses) {
    const reason = blockedAddressReason(a.address);
    if (reason) return { ok: false, message: `must not resolve to a ${reason} (${host} → ${a.address})` };
  }
  return shape;
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("dns timeout")), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;

/**
 * `lookup` for net/tls.connect: resolves, and refuses the connection before it
 * is opened when any resolved address is not public.
 */
export function guardedLookup(hostname: string, options: dns.LookupOptions, callback: LookupCallback): void {
  dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, []);
    const list = addresses as dns.LookupAddress[];
    for (const a of list) {
      const reason = blockedAddressReason(a.address);
      if (reason) return callback(new BlockedTargetError(`blocked target address ${a.address} (${reason})`), []);
    }
    if (list.length === 0) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: "ENOTFOUND" }), []);
    if (options.all) return callback(null, list);
    callback(null, list[0].address, list[0].family);
  });
}
