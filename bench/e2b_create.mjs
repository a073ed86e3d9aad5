// SPDX-License-Identifier: Apache-2.0
/*
 * e2b_create.mjs TEMPLATE COUNT - thaw-bench's e2b scenario, the client
 * side: COUNT times at once, Sandbox.create(TEMPLATE) and then its first
 * commands.run('true'), through the unmodified e2b SDK (E2B_API_URL,
 * E2B_SANDBOX_URL and E2B_API_KEY from the environment, as any E2B program
 * takes them).  Prints one line per sandbox, "ms MILLISECONDS" (create call
 * made -> run('true') returned) or "error MESSAGE", and kills the sandboxes
 * once every one is timed, so no kill overlaps a measurement.  Exit status
 * 0 when every one was timed.
 */
import { Sandbox } from 'e2b';

const [template, countArg] = process.argv.slice(2);
const count = Number(countArg);
if (!template || !Number.isInteger(count) || count < 1) {
  console.error('usage: e2b_create.mjs TEMPLATE COUNT');
  process.exit(2);
}
/* Minutes: the bench measures, it never gives up on a slow guest. */
const options = { requestTimeoutMs: 600_000, timeoutMs: 600_000 };
const sandboxes = [];

async function createAndRun() {
  const start = performance.now();
  const sbx = await Sandbox.create(template, options);
  sandboxes.push(sbx);
  await sbx.commands.run('true', options);
  return performance.now() - start;
}

const results = await Promise.allSettled(Array.from({ length: count }, createAndRun));
await Promise.allSettled(sandboxes.map((sbx) => sbx.kill(options)));
for (const r of results)
  console.log(r.status === 'fulfilled'
    ? `ms ${r.value.toFixed(3)}`
    : `error ${String(r.reason?.message ?? r.reason).replace(/\s+/g, ' ')}`);
process.exit(results.every((r) => r.status === 'fulfilled') ? 0 : 1);
