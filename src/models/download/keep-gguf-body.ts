import { convertFetchError } from "./convert-fetch-error.ts";
import { ModelDownloadError } from "./model-download-error.ts";
import { peekBody } from "./peek-body.ts";
import { redactUrl } from "./redact-url.ts";
import { ggufMagicLength, isGgufStart } from "./starts-as-gguf.ts";

/**
 * The body of a `200` that answered a resume, once its first bytes show a GGUF file: only then
 * may it replace the partial file. Anything else (a login or error page that a CDN, a proxy or an
 * expired signed URL sent) is cancelled and retried, and the partial file kept for a later resume.
 */
export async function keepGgufBody(context: {
  body: ReadableStream<Uint8Array>;
  url: URL;
  signal: AbortSignal;
  contentType: string | null;
}): Promise<ReadableStream<Uint8Array>> {
  const { url } = context;
  const peeked = await peekBody(context.body, ggufMagicLength).catch((error: unknown) => {
    throw convertFetchError(error, { url, signal: context.signal, phase: "body" });
  });
  if (isGgufStart(peeked.head)) return peeked.body;
  await peeked.body.cancel().catch(() => {});
  const what = context.contentType === null ? "" : ` (${context.contentType})`;
  throw new ModelDownloadError(
    "server-error",
    `${redactUrl(url)} answered the resumed download with a body${what} that is not a GGUF model file (which starts with "GGUF"), such as a login or error page; the partial download was kept. If this repeats, check the URL, and that the file may be downloaded without signing in.`,
  );
}
