import { MIN_SECRET_LENGTH } from "./list-endpoint-secrets.ts";

/** Default ports of the schemes a base URL may have, written out where the URL leaves them. */
const DEFAULT_PORTS: Readonly<Record<string, string>> = { "http:": "80", "https:": "443" };

/**
 * How an upstream's text may name the endpoint's own server, which it may repeat in its errors
 * (`bad request to http://10.0.0.7:8000/v1/chat/completions`): the base URL's origin
 * (`scheme://host:port`, and with its default port written out), its host with the port, and its
 * host name alone where it cannot be a word. Where Tollgate's upstreams run is the operator's business, never a client's;
 * clients read "the upstream server" instead (redact-upstream-text.ts). A host name shorter than
 * {@link MIN_SECRET_LENGTH} is left out, as short secrets are. Longest first, so that a name that
 * holds another is replaced whole.
 */
export function listEndpointNames(baseUrl: string): readonly string[] {
  const url = new URL(baseUrl);
  const names = new Set<string>([url.host]);
  // A scheme without an origin (`null`) cannot be named by one.
  if (url.origin !== "null") names.add(url.origin);
  const port = url.port === "" ? DEFAULT_PORTS[url.protocol] : url.port;
  if (port !== undefined) names.add(`${url.protocol}//${url.hostname}:${port}`);
  // Alone, only a name no sentence holds as a word: one with a dot (a domain, an IPv4 address) or
  // an IPv6 address. `model`, `server`, `tools` or `localhost` (http://model:8000) would replace
  // those words in the messages clients read, and in what classifies the error.
  if (/[.:]/.test(url.hostname)) names.add(url.hostname);
  return [...names].filter((name) => name.length >= MIN_SECRET_LENGTH).sort((a, b) => b.length - a.length);
}
