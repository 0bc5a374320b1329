/**
 * Which hosts are public: the rule behind "public URL" (a template's header media, which the provider fetches) and
 * the webhook dispatcher's SSRF guard. No DNS here; a name is judged by itself, an IP literal by its range.
 */
import ipaddr from "ipaddr.js";

/** Cloud metadata endpoints, named even though their ranges are refused anyway. */
const METADATA_ADDRESSES = new Set(["169.254.169.254", "fd00:ec2::254", "100.100.100.200"]);
const METADATA_HOSTS = new Set(["metadata.google.internal", "metadata", "instance-data", "instance-data.ec2.internal"]);

/**
 * Why an IP address is not public unicast (loopback, private, link-local, unique-local, carrier-grade NAT, reserved,
 * multicast, cloud metadata, an IPv4 address mapped into IPv6…), or null when it is.
 */
export function blockedAddressReason(address: string): string | null {
  const bare = address.replace(/^\[|\]$/g, "").replace(/%.*$/, "");
  if (!ipaddr.isValid(bare)) return "not an IP address";
  let ip = ipaddr.parse(bare);
  if (ip.kind() === "ipv6" && (ip as ipaddr.IPv6).isIPv4MappedAddress()) ip = (ip as ipaddr.IPv6).toIPv4Address();
  if (METADATA_ADDRESSES.has(ip.toString())) return "cloud metadata address";
  const range = ip.range();
  return range === "unicast" ? null : `${range} address`;
}

/**
 * Why a URL's hostname (as `new URL(…).hostname` gives it) cannot be a public host, or null when it may be: an IP
 * literal that is not public unicast, `localhost` and its subdomains, a cloud metadata name.
 */
export function nonPublicHostReason(hostname: string): string | null {
  const host = hostname.replace(/^\[|\]$/g, "").toLowerCase().replace(/\.$/, "");
  // The URL parser has already written every IPv4 form (hex, octal, short) as four decimal parts.
  if (ipaddr.isValid(host)) {
    const reason = blockedAddressReason(host);
    return reason ? `a ${reason}` : null;
  }
  if (host === "localhost" || host.endsWith(".localhost") || METADATA_HOSTS.has(host)) return "a local or metadata host";
  return null;
}
