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
  // A scheme starts where no scheme character comes before it: tried from every letter of a long
  // run, the scheme pattern read the rest of the run each time (quadratic: 100,000 letters, 9 s).
  return text.replace(/(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*:\/\/[^\s"'<>]+/g, (found) =>
    URL.canParse(found) ? redactUrl(new URL(found)) : "(a URL)",
  );
}
