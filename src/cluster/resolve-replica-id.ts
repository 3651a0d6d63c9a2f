import { randomBytes } from "node:crypto";
import { hostname } from "node:os";

/**
 * The most characters a replica id may take URL-encoded: it names its journal file
 * (`pending-charges-ID.TAG.jsonl`, open-store.ts), which must fit in a file name's 255 bytes.
 * Longer, the replica started with only a warning, and the charges it came to owe during a
 * database outage were kept in memory only.
 */
const MAX_ENCODED_REPLICA_ID = 200;

/**
 * This server's replica id: `TOLLGATE_REPLICA_ID` when set, else `host:port` with the port asked
 * for. A starting replica releases the reservations its id left open (SPEC §11), so two live
 * servers on one database must never share an id. For a wildcard or loopback host the machine's
 * hostname stands in for the host: replicas on different machines all listening on 0.0.0.0:8080
 * or 127.0.0.1:8080 (behind a proxy of their own) then differ. Port 0 names nothing stable (each
 * start gets another port), so it gets a random suffix: such an id is never shared, and never the
 * same across restarts (its left-overs are released once their lease expires). Throws for a
 * `TOLLGATE_REPLICA_ID` too long to name a file.
 */
export function resolveReplicaId(host: string, port: number, env: NodeJS.ProcessEnv = process.env): string {
  const configured = env.TOLLGATE_REPLICA_ID?.trim();
  if (configured) {
    const encoded = encodeURIComponent(configured).length;
    if (encoded > MAX_ENCODED_REPLICA_ID)
      throw new Error(
        `TOLLGATE_REPLICA_ID is too long: ${encoded} characters once URL-encoded, at most ${MAX_ENCODED_REPLICA_ID} (it names this replica's journal of owed charges, a file name); set a shorter one, such as the host's name.`,
      );
    return configured;
  }
  const machine = isWildcardHost(host) || isLoopbackHost(host) ? hostname() : host;
  return port === 0 ? `${machine}:0-${randomBytes(6).toString("hex")}` : `${machine}:${port}`;
}

function isWildcardHost(host: string): boolean {
  return host === "0.0.0.0" || host === "::" || host === "";
}

/** 127.0.0.0/8 (also IPv4-mapped), ::1 and localhost: an address every machine has. */
function isLoopbackHost(host: string): boolean {
  const address = host.toLowerCase().replace(/^\[(.*)\]$/, "$1");
  return (
    address === "localhost" ||
    address.endsWith(".localhost") ||
    address === "::1" ||
    /^(::ffff:)?127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(address)
  );
}
