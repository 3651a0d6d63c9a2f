/** The response headers of the OpenAPI document (create-openapi-document.ts): components and references. */

/** A reference to one of {@link HEADER_COMPONENTS}. */
export const headerReference = (name: string) => ({ $ref: `#/components/headers/${name}` });

export type ResponseHeaders = Record<string, { $ref: string }>;

/**
 * The `x-ratelimit-*` headers (`key-limits.ts`): each pair of a dimension only when the key has
 * that limit (`rpm`, `tpm`), on the answers a limited key gets once it is authenticated.
 */
export const RATE_LIMIT_HEADERS: ResponseHeaders = {
  "x-ratelimit-limit-requests": headerReference("RateLimitLimitRequests"),
  "x-ratelimit-remaining-requests": headerReference("RateLimitRemainingRequests"),
  "x-ratelimit-reset-requests": headerReference("RateLimitResetRequests"),
  "x-ratelimit-limit-tokens": headerReference("RateLimitLimitTokens"),
  "x-ratelimit-remaining-tokens": headerReference("RateLimitRemainingTokens"),
  "x-ratelimit-reset-tokens": headerReference("RateLimitResetTokens"),
};

/**
 * The header components of {@link RATE_LIMIT_HEADERS}, one set per bucket (`limits/`): a bucket
 * holds at most the per-minute limit and refills continuously at that rate.
 */
function rateLimitHeaderComponents() {
  const buckets = [
    { name: "Requests", unit: "requests", limit: "rpm" },
    { name: "Tokens", unit: "tokens", limit: "tpm" },
  ] as const;
  return Object.fromEntries(
    buckets.flatMap(({ name, unit, limit }) => {
      const sent = `Sent only when the key has a \`${limit}\` limit.`;
      return [
        [
          `RateLimitLimit${name}`,
          {
            description: `The key's ${unit} per minute (\`${limit}\`): what its bucket holds when full. ${sent}`,
            schema: { type: "integer", minimum: 1 },
          },
        ],
        [
          `RateLimitRemaining${name}`,
          {
            description: `Whole ${unit} left in the key's bucket now (never negative). ${sent}`,
            schema: { type: "integer", minimum: 0 },
          },
        ],
        [
          `RateLimitReset${name}`,
          {
            description: `Time until the key's ${unit} bucket is full again, as OpenAI writes it: milliseconds under a second (\`17ms\`), else whole seconds rounded up (\`1s\`, \`59s\`), with minutes from a minute on (\`1m0s\`, \`6m0s\`); \`0s\` when full. ${sent}`,
            schema: { type: "string", pattern: "^(?:[0-9]+ms|(?:[1-9][0-9]*m)?[0-9]+s)$" },
          },
        ],
      ];
    }),
  );
}

/** The document's `components.headers`. */
export const HEADER_COMPONENTS = {
  XRequestId: {
    description:
      "The request's id: the client's own `x-request-id` when it is 1 to 128 visible ASCII characters, else a new one. It is the usage row's `request_id`.",
    required: true,
    schema: { type: "string" },
  },
  RetryAfter: {
    description: "Seconds to wait before retrying.",
    required: true,
    schema: { type: "integer", minimum: 1 },
  },
  XShouldRetry: { description: "The request will fail again as it is.", schema: { const: "false" } },
  ...rateLimitHeaderComponents(),
  CacheControl: {
    description: "On a stream (`text/event-stream`): `no-cache`, so that no cache stores or replays it.",
    schema: { const: "no-cache" },
  },
  XAccelBuffering: {
    description:
      "On a stream (`text/event-stream`): `no`, so that a proxy such as nginx passes each event on at once instead of buffering the stream.",
    schema: { const: "no" },
  },
  XHasMore: {
    description:
      "On a CSV page (`format=csv` with `limit`): `true` when more rows follow, as the JSON page's `has_more`.",
    schema: { enum: ["true", "false"] },
  },
  XNextAfter: {
    description:
      "On a CSV page (`format=csv` with `limit`): the cursor of its last row, as the JSON page's `next_after` (pass it as `after` for the next page, or later for the rows added since); on an empty page the `after` given, and none when none was.",
    schema: { type: "string" },
  },
  IdempotentReplayed: {
    description:
      "`true` when this answer is the credit an earlier request with the same `Idempotency-Key` made.",
    schema: { const: "true" },
  },
};
