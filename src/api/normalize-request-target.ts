/** An absolute-form target's scheme and authority (`http://host:8080`), which routing ignores. */
const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/;
/** A percent-encoded octet. */
const PERCENT_ENCODED = /%([0-9A-Fa-f]{2})/g;
/** RFC 3986's unreserved characters, whose percent-encoding names the same resource (section 6.2.2.2). */
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

/**
 * The request target as the router reads it, made so before routing that every check that reads
 * the URL (CORS, the admin paths' 401, the drain's 503) sees the path the router sees:
 * - each run of slashes in the path made one: a base URL written with a trailing slash and joined
 *   to a path by a client or a script (`http://host/` + `/v1/models`) names the route it means;
 * - an absolute-form target (`GET http://host/v1/models HTTP/1.1`, which proxies send) made its
 *   path: it was routed, but the checks that read `/v1/` or `/admin` saw `http://...` (no CORS
 *   headers, served while draining, 404 for an unknown admin path where a caller without the
 *   admin key gets 401);
 * - unreserved characters that were percent-encoded decoded (`/%61dmin/x` is `/admin/x`: routed
 *   so, but read as another path by those checks); other escapes (`%2F`) stay.
 * The query is left as it is, and so is `*`. Most targets (a path, no `//`, no `%`) cost three
 * character searches.
 */
export function normalizeRequestTarget(url: string): string {
  let target = url;
  if (!target.startsWith("/")) {
    const origin = ABSOLUTE_FORM.exec(target);
    if (origin === null) return url;
    target = target.slice(origin[0].length);
    if (!target.startsWith("/")) target = `/${target}`;
  }
  const query = target.indexOf("?");
  let path = query === -1 ? target : target.slice(0, query);
  if (path.includes("//")) path = path.replace(/\/{2,}/g, "/");
  if (path.includes("%"))
    path = path.replace(PERCENT_ENCODED, (encoded, hex: string) => {
      const character = String.fromCharCode(Number.parseInt(hex, 16));
      return UNRESERVED.test(character) ? character : encoded;
    });
  return path + (query === -1 ? "" : target.slice(query));
}
