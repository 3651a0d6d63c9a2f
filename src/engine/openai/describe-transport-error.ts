/**
 * What went wrong on the way to an upstream, completing "The upstream server of the model 'x' ...",
 * read from the error codes of undici and Node's sockets (also on the error's `cause`).
 * Names neither the address nor anything else from the configuration.
 */
export function describeTransportError(error: unknown): string {
  const code = readCode(error) ?? readCode((error as { cause?: unknown } | undefined)?.cause);
  switch (code) {
    case "ECONNREFUSED":
      return "refused the connection";
    case "UND_ERR_CONNECT_TIMEOUT":
    case "ETIMEDOUT":
      return "did not accept a connection in time";
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return "could not be found (its host name does not resolve)";
    case "ECONNRESET":
    case "EPIPE":
    case "UND_ERR_SOCKET":
    case "UND_ERR_CLOSED":
      return "closed the connection";
    case "EHOSTUNREACH":
    case "ENETUNREACH":
      return "is unreachable";
    default:
      if (code !== undefined && /^(ERR_TLS|ERR_SSL|CERT_|UNABLE_TO_|DEPTH_ZERO|SELF_SIGNED)/.test(code)) {
        return "failed the TLS handshake";
      }
      return "could not be reached";
  }
}

function readCode(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" ? code : undefined;
}
