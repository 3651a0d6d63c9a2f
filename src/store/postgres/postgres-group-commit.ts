/** Most operations in one batch statement; more wait for the next. */
const MAX_BATCH = 500;

/**
 * Group commit, per account: the operations of an account that arrive while its batch is in
 * flight go out together in its next one, as one statement (`many`), so that the account's row is
 * locked and committed once per batch rather than once per request. Accounts batch apart: one
 * whose row is held (a slow or stuck transaction elsewhere) holds up its own requests only, and
 * at most two connections (a reserve batch and a settle batch). `many` answers each operation's
 * result, or `undefined` for those it left alone (a total that did not fit, a duplicate, no such
 * account): those run one at a time through `one`, in order, as they would have alone. A batch of
 * one goes through `one` directly. An operation with the same key as an earlier one in the batch
 * waits for the next batch.
 *
 * When `many` fails, what happens depends on why (see {@link isAboutOneOperation}): an error one
 * operation may have caused (a duplicate id, a value out of range) is found by running each alone,
 * as above; any other (the database cannot be reached, a connection broke, a timeout) fails every
 * operation of the batch with it at once: run one at a time, each would wait for the same failure
 * again, the account's next operations queued behind them. And once the database has failed to
 * answer within a timeout (see {@link isTimeout}), the operations of the account that waited
 * meanwhile fail with it too, rather than wait for a timeout of their own: every operation fails
 * after about one timeout, however many the account has in flight. (A settle that fails is tried
 * again by its caller, and settling is idempotent.)
 */
export function createBatcher<Item, Result>(handlers: {
  one: (item: Item) => Promise<Result>;
  many: (items: Item[]) => Promise<(Result | undefined)[]>;
}): { run(account: string, key: string, item: Item): Promise<Result> } {
  interface Entry {
    key: string;
    item: Item;
    done: PromiseWithResolvers<Result>;
  }
  /** The operations waiting for each account's next batch; an account is here while it has a batch in flight. */
  const queues = new Map<string, Entry[]>();

  /**
   * Runs one batch and settles each of its entries. Answers the timeout that ended it, if one did:
   * the database did not answer, and the entries queued meanwhile fail with it.
   */
  async function runBatch(batch: Entry[]): Promise<unknown> {
    let left = batch;
    if (batch.length > 1) {
      let results: (Result | undefined)[];
      try {
        results = await handlers.many(batch.map((entry) => entry.item));
      } catch (error) {
        if (!isAboutOneOperation(error)) {
          for (const entry of batch) entry.done.reject(error);
          return isTimeout(error) ? error : undefined;
        }
        results = [];
      }
      left = [];
      batch.forEach((entry, index) => {
        const result = results[index];
        if (result === undefined) left.push(entry);
        else entry.done.resolve(result);
      });
    }
    for (const [index, entry] of left.entries()) {
      try {
        entry.done.resolve(await handlers.one(entry.item));
      } catch (error) {
        entry.done.reject(error);
        if (isTimeout(error)) {
          for (const rest of left.slice(index + 1)) rest.done.reject(error);
          return error;
        }
      }
    }
    return undefined;
  }

  async function drain(account: string, queue: Entry[]): Promise<void> {
    try {
      while (queue.length > 0) {
        const batch: Entry[] = [];
        const keys = new Set<string>();
        const later: Entry[] = [];
        for (const entry of queue.splice(0)) {
          if (batch.length < MAX_BATCH && !keys.has(entry.key)) {
            keys.add(entry.key);
            batch.push(entry);
          } else {
            later.push(entry);
          }
        }
        queue.push(...later);
        const timeout = await runBatch(batch);
        if (timeout !== undefined) for (const entry of queue.splice(0)) entry.done.reject(timeout);
      }
    } catch (error) {
      // runBatch settles every entry itself; whatever else went wrong fails the rest, never hangs.
      for (const entry of queue.splice(0)) entry.done.reject(error);
    } finally {
      // In the same turn as the loop's last check: an operation that arrives later starts a new queue.
      queues.delete(account);
    }
  }

  return {
    run(account, key, item) {
      const done = Promise.withResolvers<Result>();
      const queued = queues.get(account);
      if (queued !== undefined) {
        queued.push({ key, item, done });
      } else {
        const queue = [{ key, item, done }];
        queues.set(account, queue);
        // The rest of this turn's operations of the account join the batch.
        setImmediate(() => void drain(account, queue));
      }
      return done.promise;
    },
  };
}

/**
 * SQLSTATE classes of errors that one operation of a batch may cause without the others: a data
 * exception (22: a value out of range), an integrity constraint violation (23: a duplicate id) and
 * a transaction rollback (40: a deadlock or a serialization failure, which running alone retries).
 */
const OPERATION_ERROR_CLASSES = new Set(["22", "23", "40"]);

/**
 * Whether a failed batch statement may have failed because of one of its operations (see
 * {@link OPERATION_ERROR_CLASSES}), so that each alone may fare better. Anything else (a broken or
 * refused connection, a timeout, the server shutting down) would fail each of them in turn.
 */
function isAboutOneOperation(error: unknown): boolean {
  const code = error instanceof Error && "code" in error ? error.code : undefined;
  return typeof code === "string" && code.length === 5 && OPERATION_ERROR_CLASSES.has(code.slice(0, 2));
}

/**
 * `pg`'s messages when the database did not answer in time: a statement (the pool's
 * `query_timeout`), or a new connection (`connectionTimeoutMillis`, reported two ways).
 */
const TIMEOUT_MESSAGE =
  /^(?:Query read timeout|timeout exceeded when trying to connect|Connection terminated due to connection timeout)/;

/**
 * Whether the database failed to answer within a timeout: the client gave up (see
 * {@link TIMEOUT_MESSAGE}), or the server cancelled the statement after `statement_timeout` (57014:
 * a row held all that time by a transaction elsewhere).
 */
function isTimeout(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if ("code" in error && error.code === "57014") return true;
  return TIMEOUT_MESSAGE.test(error.message);
}
