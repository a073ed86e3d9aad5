// SPDX-License-Identifier: Apache-2.0
/*
 * checks.mjs - what the E2B scripts share: named checks that fail loudly,
 * and the patience a slow guest needs.
 *
 * Each script (sandbox.mjs, commands.mjs, files.mjs) is an ordinary E2B
 * program: it imports the unmodified `e2b` package and never names thaw.
 * The SDK itself reads E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY from
 * the environment, which test_e2b sets to the daemon's e2b_listen and
 * token.  A script runs its checks in order; a failed check prints why and
 * the script goes on with the next (their failures are independent, and
 * the whole list is what tells where thaw differs from E2B), then exits 1.
 * A failure of what the rest depends on (the sandbox's creation) throws out
 * of the script instead.
 *
 * Time: guests run in KVM's instruction emulator on some hosts (a fork+exec
 * takes seconds), so every SDK call gets minutes, never a speed claim;
 * test_e2b's own limit ends a hang.  THAW_E2B_SLOWNESS (test_e2b passes
 * harness.h's guest_slowness()) multiplies those minutes.
 */
import assert from 'node:assert/strict';

export const slowness = Math.max(1, Number(process.env.THAW_E2B_SLOWNESS) || 1);

/* Milliseconds: @seconds on a quick host, scaled. */
export const patience = (seconds) => Math.round(seconds * 1000 * slowness);

/* Every SDK call: request time-outs of minutes; a sandbox lifetime of an
 * hour, which outlives any script (each kills its sandbox at the end) and
 * leaves room under E2B's 24 h limit for setTimeout to go further. */
export const sdkOptions = {
  requestTimeoutMs: patience(300),
  timeoutMs: 3_600_000,
};

/* Options of commands.run(): the command's own deadline, generous. */
export const runOptions = { requestTimeoutMs: patience(300), timeoutMs: patience(300) };

const failures = [];

/* Runs check @name (an async function), printing its outcome. */
export async function check(name, fn) {
  const start = Date.now();
  try {
    await fn();
    console.log(`ok   ${name} (${((Date.now() - start) / 1000).toFixed(1)} s)`);
  } catch (err) {
    failures.push(name);
    console.log(`FAIL ${name} (${((Date.now() - start) / 1000).toFixed(1)} s)`);
    console.log(indent(describe(err)));
  }
}

/* The error @promise rejects with, which must be an instance of @cls;
 * fails when it resolves or throws something else. */
export async function rejects(promise, cls, what) {
  let value;
  try {
    value = await promise;
  } catch (err) {
    assert.ok(err instanceof cls,
      `${what}: threw ${summary(err)}, expected ${cls.name}`);
    return err;
  }
  assert.fail(`${what}: resolved (${inspect(value)}), expected ${cls.name}`);
}

/* Waits until @test() is true, polling, for at most @seconds (scaled). */
export async function eventually(what, seconds, test) {
  const end = Date.now() + patience(seconds);
  for (;;) {
    if (await test())
      return;
    if (Date.now() > end)
      assert.fail(`${what}: not so after ${seconds * slowness} s`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/* Ends the script: the list of failed checks, and the exit status.  An
 * explicit exit, since a background command's stream left open must not
 * keep node waiting. */
export function finish(script) {
  if (failures.length) {
    console.log(`${script}: ${failures.length} check(s) failed: ${failures.join('; ')}`);
    process.exit(1);
  }
  console.log(`${script}: every check passed`);
  process.exit(0);
}

/* Runs @main, a script's body; an exception out of it (a check's
 * prerequisite failed) fails the script with its stack. */
export function script(name, main) {
  main().then(() => finish(name), (err) => {
    console.log(`${name}: stopped: ${describe(err)}`);
    process.exit(1);
  });
}

/* An error's class and message, a command's exit code and stderr, and
 * its cause's (undici's "fetch failed" keeps the reason there). */
function summary(err) {
  if (!(err instanceof Error))
    return inspect(err);
  const cause = err.cause instanceof Error ? ` (cause: ${summary(err.cause)})` : '';
  /* A CommandExitError's message is envd's error, often empty. */
  const exit = 'exitCode' in err && 'stderr' in err
    ? ` [exit code ${err.exitCode}, stderr ${inspect(err.stderr)}]`
    : '';
  return `${err.name}: ${err.message}${exit}${cause}`;
}

/* summary(), and where it was thrown. */
function describe(err) {
  const stack = err instanceof Error && err.stack
    ? '\n' + err.stack.split('\n').filter((line) => /^\s+at /.test(line)).slice(0, 5).join('\n')
    : '';
  return summary(err) + stack;
}

function inspect(value) {
  try {
    return JSON.stringify(value)?.slice(0, 500) ?? String(value);
  } catch {
    return String(value);
  }
}

function indent(text) {
  return text.split('\n').map((line) => '     ' + line).join('\n');
}
