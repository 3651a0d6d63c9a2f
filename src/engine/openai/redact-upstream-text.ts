/**
 * API keys and bearer tokens that an upstream may echo (`Incorrect API key: sk-...`): a backstop
 * for credentials Tollgate does not know of, such as another endpoint's behind a gateway.
 */
// A bearer token ends before the punctuation that closes the text around it ("(got Bearer
// abc.def)"): token characters are letters, digits and `-._~+/=` (RFC 6750).
// A URL's user and password (postgres://svc:hunter2@db/prod in a traceback) go, its host stays.
const CREDENTIAL =
  /\b(?:sk|pk|rk|ak|key)[-_][A-Za-z0-9_-]{6,}|\bBearer\s+[A-Za-z0-9\-._~+/]+=*|\b[A-Za-z0-9_-]{32,}\b|(?<=\b[A-Za-z][A-Za-z0-9+.-]*:\/\/)[^\s/@:]*:[^\s/@]+(?=@)/g;

/**
 * A URL's query value whose name says it is a credential (`?token=`, `&api_key=`, `&sig=`,
 * `&X-Amz-Signature=`): an upstream's error may quote a URL of its own, signed or with a token.
 */
const CREDENTIAL_QUERY_VALUE =
  /(?<=[?&][\w.-]*(?:token|key|secret|sig|signature|password|passwd|auth|credential)[\w.-]*=)[^&\s#"'<>]+/gi;

/**
 * Shortest piece of a secret removed where it stands alone (an upstream that quotes the start or
 * the end of the key it got: `Incorrect key UPSTREAM-SECR...`), from secrets at least
 * {@link MIN_PARTIAL_SECRET_LENGTH} long: shorter pieces of shorter values would match ordinary
 * words.
 */
const MIN_SECRET_PIECE = 10;
const MIN_PARTIAL_SECRET_LENGTH = 16;

/** What a client or a log line reads where a secret was. */
export const REDACTED = "[redacted]";

/** What a client reads where an upstream named its own server. */
export const UPSTREAM_SERVER = "the upstream server";

/**
 * Upstream text (an error's message or param, a header value) as it may reach a client or a log
 * line: every one of the endpoint's `secrets` (see list-endpoint-secrets.ts) removed wherever it
 * occurs, and any piece of a long one (see {@link MIN_SECRET_PIECE}), then each of its `names` (see list-endpoint-names.ts; none for a log line, where the
 * endpoint is named anyway) replaced by {@link UPSTREAM_SERVER}, then anything shaped like a
 * credential. `secrets` and `names` go longest first, so that one that holds another is removed
 * whole.
 */
export function redactUpstreamText(
  text: string,
  secrets: readonly string[],
  names: readonly string[] = [],
): string {
  let redacted = text;
  for (const secret of secrets) redacted = redacted.replaceAll(secret, REDACTED);
  for (const secret of secrets)
    if (secret.length >= MIN_PARTIAL_SECRET_LENGTH) redacted = dropSecretPieces(redacted, secret);
  if (names.length > 0) redacted = redacted.replace(namePattern(names), UPSTREAM_SERVER);
  return redacted.replace(CREDENTIAL, REDACTED).replace(CREDENTIAL_QUERY_VALUE, REDACTED);
}

/**
 * `text` with every run of at least {@link MIN_SECRET_PIECE} characters that is a piece of
 * `secret` replaced by {@link REDACTED}: each window of the secret is looked for, and a match is
 * widened as far as text and secret agree. Only error texts pass here, so the cost of a search
 * per window does not matter.
 */
function dropSecretPieces(text: string, secret: string): string {
  const ranges: [number, number][] = [];
  for (let offset = 0; offset + MIN_SECRET_PIECE <= secret.length; offset++) {
    const window = secret.slice(offset, offset + MIN_SECRET_PIECE);
    for (let found = text.indexOf(window); found !== -1; found = text.indexOf(window, found + 1)) {
      let start = found;
      let end = found + MIN_SECRET_PIECE;
      for (let back = offset; back > 0 && start > 0 && text[start - 1] === secret[back - 1]; back--) start--;
      for (
        let ahead = offset + MIN_SECRET_PIECE;
        ahead < secret.length && text[end] === secret[ahead];
        ahead++
      )
        end++;
      ranges.push([start, end]);
    }
  }
  if (ranges.length === 0) return text;
  ranges.sort((a, b) => a[0] - b[0]);
  let result = "";
  let at = 0;
  for (const [start, end] of ranges) {
    if (end <= at) continue;
    if (start >= at) result += text.slice(at, start) + REDACTED;
    at = end;
  }
  return result + text.slice(at);
}

/**
 * The names, in any case (host names are), where they stand whole: not inside a longer host
 * name, address or port (`127.0.0.1` in `127.0.0.10` or `10.127.0.0.1`, `api.example.com` in
 * `eu.api.example.com`), but before the punctuation that ends a sentence.
 */
function namePattern(names: readonly string[]): RegExp {
  const alternatives = names.map((name) => name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|");
  return new RegExp(`(?<![\\w.-])(?:${alternatives})(?![\\w-]|\\.[\\w-])`, "gi");
}

/**
 * A text cut short (a body read up to a bound) may end in the first characters of a secret,
 * which no exact match finds: those are dropped.
 */
export function dropCutSecret(text: string, secrets: readonly string[]): string {
  let cut = 0;
  for (const secret of secrets) {
    for (let length = Math.min(secret.length - 1, text.length); length > cut; length--) {
      if (text.endsWith(secret.slice(0, length))) cut = length;
    }
  }
  return text.slice(0, text.length - cut);
}
