/**
 * A URL as it may appear in logs and client messages: without user, password, query or fragment
 * (signed download URLs carry their secrets in the query). A removed query shows as `?…`.
 */
export function redactUrl(url: URL): string {
  const shown = new URL(url);
  shown.username = "";
  shown.password = "";
  const hadQuery = shown.search !== "";
  shown.search = "";
  shown.hash = "";
  return hadQuery ? `${shown.href}?…` : shown.href;
}
