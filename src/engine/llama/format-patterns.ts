/**
 * The string formats a grammar writes as patterns (see convert-string-pattern.ts): OpenAI's
 * structured outputs take `email`, `hostname`, `ipv4`, `ipv6` and `duration` beside the date and
 * time formats and `uuid`, and zod's `.email()`, `.url()` and pydantic's `EmailStr` send these.
 * Each writes a strict part of its format, as the `uuid` grammar does: what the strictest readers
 * accept (zod 4's regular expressions, ajv-formats' full formats, `new URL()`), not every string
 * the format allows (an IPv6 address is written whole, without `::`; an e-mail address in lowercase
 * letters, digits and `._+-` between them; a URI is an `https` URL). A format not named here is
 * accepted but not enforced.
 */
const label = "[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?";
const octet = "(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";
/** Letters and digits, with single dashes between them: a domain's label (50 characters at most). */
const dashedName = "[a-z0-9]{1,16}(?:-[a-z0-9]{1,16}){0,2}";
const domain = `${dashedName}(?:\\.${dashedName}){0,2}\\.[a-z]{2,6}`;
const figures = "\\d{1,4}";
const timePart = `T(?:${figures}H(?:${figures}M)?(?:${figures}S)?|${figures}M(?:${figures}S)?|${figures}S)`;
const datePart = `(?:${figures}Y(?:${figures}M)?(?:${figures}D)?|${figures}M(?:${figures}D)?|${figures}D)`;

/**
 * Each is bounded, within the limits readers hold to (an e-mail address's 64 characters before
 * the `@` and 254 in all, a label's 63, a host name's 253): a model writing at random (the tiny
 * test model wrote one e-mail address until `max_tokens`) still ends the string.
 */
export const formatPatterns: Record<string, string | undefined> = Object.assign(Object.create(null), {
  email: `^[a-z0-9]{1,16}(?:[._+-][a-z0-9]{1,16}){0,2}@${domain}$`,
  hostname: `^${label}(?:\\.${label}){0,5}$`,
  ipv4: `^${octet}(?:\\.${octet}){3}$`,
  ipv6: "^[0-9a-f]{1,4}(?::[0-9a-f]{1,4}){7}$",
  // At least one part, and a time part only with a figure: `P` and `P1DT` are not durations.
  duration: `^P(?:${figures}W|${datePart}(?:${timePart})?|${timePart})$`,
  uri: `^https://${domain}(?:/[A-Za-z0-9._~-]{1,16}){0,4}/?(?:\\?[A-Za-z0-9._~=&-]{0,32})?$`,
});
