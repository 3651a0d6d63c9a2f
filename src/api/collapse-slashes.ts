/**
 * The request target with each run of slashes in its path made one: a base URL written with a
 * trailing slash and joined to a path by a client or a script (`http://host/` + `/v1/models`,
 * `http://host/v1/` + `/chat/completions`) names the route it means. Done before routing, so
 * that every check that reads the URL (CORS, the admin paths' 401, the drain's 503) sees the path
 * the router sees. The query is left as it is; a target that is not a path (`*`, an absolute URL)
 * too.
 */
export function collapseSlashes(url: string): string {
  const query = url.indexOf("?");
  const path = query === -1 ? url : url.slice(0, query);
  if (!path.startsWith("/") || !path.includes("//")) return url;
  return path.replace(/\/{2,}/g, "/") + (query === -1 ? "" : url.slice(query));
}
