import { Readable } from "node:stream";
import type { Static } from "@sinclair/typebox";
import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import {
  decodeUsageCursor,
  encodeUsageCursor,
  readUsagePages,
  renderUsageGroup,
  renderUsageRow,
  selectUsage,
  sumUsageGroups,
  USAGE_CSV_HEADER,
  type UsageSelection,
  usageCsvLines,
  usageRowsCsv,
} from "../../admin/usage-report.ts";
import { AppError } from "../../errors/app-error.ts";
import type { Store, UsageRecord } from "../../store/store.ts";
import type { UsageCursor } from "../../store/usage-query.ts";
import { UsageQuery } from "../schemas/admin-request-schemas.ts";
import { closeWhenStalled } from "../write-event-stream.ts";
import type { AdminRoutesOptions } from "./admin.ts";
import { DEFAULT_PAGE_LIMIT, finishPage, readPageLimit } from "./admin-paging.ts";
import { mapAdminErrors } from "./admin-route-helpers.ts";

/**
 * `GET /admin/usage`: usage rows filtered, a page at a time as JSON, summed by `group_by`, or every
 * row as CSV. Register it in the admin scope (`registerAdminRoutes`), whose hooks check the admin
 * key and the query.
 */
export function registerUsageRoute(admin: FastifyInstance, options: AdminRoutesOptions): void {
  const { store } = options;

  admin.get<{ Querystring: Static<typeof UsageQuery> }>(
    "/admin/usage",
    { schema: { querystring: UsageQuery } },
    async (request, reply) => {
      const query = request.query;
      const grouping = query.group_by;
      if (grouping !== undefined && (query.limit !== undefined || query.after !== undefined)) {
        throw new AppError(
          "invalid_value",
          "limit and after page rows; group_by answers every group at once.",
          {
            param: query.after === undefined ? "limit" : "after",
          },
        );
      }
      const limit = query.limit === undefined ? undefined : readPageLimit(query.limit);
      const selection = await mapAdminErrors(() => selectUsage(store, query));
      const cursor = query.after;
      const after =
        cursor === undefined ? undefined : await mapAdminErrors(async () => decodeUsageCursor(cursor));
      if (query.format === "csv" && limit !== undefined) {
        // A page, read whole as a JSON page is: its position goes in headers, as a CSV body has
        // no place for it (a CSV export by pages could not be continued).
        const page = await readUsagePage(store, selection, after, limit, cursor);
        reply.header("x-has-more", String(page.position.has_more));
        if (page.position.next_after !== null) reply.header("x-next-after", page.position.next_after);
        reply.type("text/csv; charset=utf-8");
        return joinCsvLines([USAGE_CSV_HEADER, ...usageRowsCsv(page.items, selection.accountNames)]);
      }
      if (query.format === "csv") {
        reply.type("text/csv; charset=utf-8");
        // HEAD sends no body: Fastify would read the whole ledger and drop it (seconds of CPU
        // for a million rows, after the answer went out, with no client left to stop it).
        if (request.method === "HEAD") return Readable.from([]);
        // Streamed a page at a time: an export of the whole ledger holds one page in memory.
        const lines = usageCsvLines(store, selection, grouping, { after, limit });
        const stream = await startCsvStream(lines, request.log);
        closeWhenStalled(reply.raw, options.clientStallTimeoutMs);
        return stream;
      }
      if (grouping !== undefined) {
        const groups = await sumUsageGroups(store, selection, grouping);
        return {
          object: "list",
          group_by: grouping,
          data: groups.map((group) => renderUsageGroup(group, grouping)),
        };
      }
      const page = await readUsagePage(store, selection, after, limit ?? DEFAULT_PAGE_LIMIT, cursor);
      return {
        object: "list",
        data: page.items.map((record) => renderUsageRow(record, selection.accountNames)),
        ...page.position,
      };
    },
  );
}

/** One page of `limit` usage rows after `after`, with its position (`cursor`: the `after` sent). */
async function readUsagePage(
  store: Store,
  selection: UsageSelection,
  after: UsageCursor | undefined,
  limit: number,
  cursor: string | undefined,
) {
  const records: UsageRecord[] = [];
  for await (const page of readUsagePages(store, selection, { after, limit: limit + 1 }))
    records.push(...page);
  return finishPage(records, limit, cursor, encodeUsageCursor);
}

/**
 * The CSV as a stream, once its first lines (the header and the first page: see
 * {@link usageCsvLines}) are read: a store that fails before any row is sent gets the request
 * its error answer. Past that the status is sent, and a failure can only cut the response short:
 * it is logged, since the client sees only a connection closed early.
 */
async function startCsvStream(lines: AsyncGenerator<string[]>, log: FastifyBaseLogger): Promise<Readable> {
  const first = await lines.next();
  async function* chunks(): AsyncGenerator<string> {
    if (first.done === true) return;
    yield joinCsvLines(first.value);
    try {
      for await (const chunk of lines) yield joinCsvLines(chunk);
    } catch (error) {
      log.error({ err: error }, "usage CSV cut short: reading a later page failed");
      throw error;
    }
  }
  return Readable.from(chunks());
}

/** CSV lines as the body sends them: each ended with CRLF. */
function joinCsvLines(lines: readonly string[]): string {
  return lines.map((line) => `${line}\r\n`).join("");
}
