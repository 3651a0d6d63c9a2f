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

/**
 * `text` with every URL in it redacted by {@link redactUrl}: the messages of transport errors
 * (undici's among them) may repeat the URL they were given, user, password and query included.
 */
export function redactUrlsInText(text: string): string {
  return text.replace(/[A-Za-z][A-Za-z0-9+.-]*:\/\/[^\s"'<>]+/g, (found) =>
    URL.canParse(found) ? redactUrl(new URL(found)) : "(a URL)",
  );
}
