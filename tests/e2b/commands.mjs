// SPDX-License-Identifier: Apache-2.0
/*
 * commands.mjs - envd's process service through the unmodified SDK:
 * commands.run's stdout, stderr and exit code, a failing command's
 * CommandExitError, envs, cwd, user, timeoutMs, a background command fed
 * with sendStdin, closeStdin, reattached with commands.connect, listed by
 * commands.list and killed; and the answers for a process that does not
 * exist.  One sandbox; see checks.mjs for how checks fail.
 */
import assert from 'node:assert/strict';
import { CommandExitError, NotFoundError, Sandbox, TimeoutError } from 'e2b';
import { check, eventually, rejects, runOptions, script, sdkOptions } from './checks.mjs';

/* A pid no guest process has: Linux's pid_max is at most 2^22. */
const NO_SUCH_PID = 4194304 + 17;

/* Whether @handle's command ended (or its stream failed), as a flag
 * polled by eventually(): a wait for its output then stops when no more
 * can come instead of at the hang deadline. */
function endOf(handle) {
  const flag = { ended: false };
  handle.wait().catch(() => {}).finally(() => { flag.ended = true; });
  return flag;
}

/* Why a command's output is not what was awaited. */
const endedEarly = (handle) =>
  `the command ended first (exit code ${handle.exitCode}, error ${handle.error})`;

script('commands.mjs', async () => {
  const sbx = await Sandbox.create(sdkOptions);
  console.log(`created ${sbx.sandboxId}`);

  try {
    await check('run: stdout, empty stderr, exit code 0', async () => {
      const r = await sbx.commands.run('echo hello; echo there', runOptions);
      assert.equal(r.exitCode, 0);
      assert.equal(r.stdout, 'hello\nthere\n');
      assert.equal(r.stderr, '');
    });

    await check('run: stderr apart from stdout, and the callbacks', async () => {
      const out = [], err = [];
      const r = await sbx.commands.run('echo to-out; echo to-err >&2', {
        ...runOptions,
        onStdout: (data) => out.push(data),
        onStderr: (data) => err.push(data),
      });
      assert.equal(r.stdout, 'to-out\n');
      assert.equal(r.stderr, 'to-err\n');
      assert.equal(out.join(''), 'to-out\n');
      assert.equal(err.join(''), 'to-err\n');
    });

    await check('a failing command: CommandExitError with its code and output', async () => {
      const e = await rejects(sbx.commands.run('echo partial; echo broken >&2; exit 7', runOptions),
        CommandExitError, 'exit 7');
      assert.equal(e.exitCode, 7);
      assert.equal(e.stdout, 'partial\n');
      assert.equal(e.stderr, 'broken\n');
    });

    await check('a command that does not exist: exit code 127', async () => {
      const e = await rejects(sbx.commands.run('thaw-e2b-no-such-program', runOptions),
        CommandExitError, 'an unknown program');
      assert.equal(e.exitCode, 127);
    });

    await check('envs', async () => {
      const r = await sbx.commands.run('echo "$THAW_A|$THAW_B"', {
        ...runOptions,
        envs: { THAW_A: 'one two', THAW_B: 'x=y' },
      });
      assert.equal(r.stdout, 'one two|x=y\n');
    });

    await check('cwd', async () => {
      const r = await sbx.commands.run('pwd', { ...runOptions, cwd: '/tmp' });
      assert.equal(r.stdout, '/tmp\n');
    });

    await check('user: E2B\'s default user, and root when asked', async () => {
      const r = await sbx.commands.run('id -un; id -u; pwd; echo "$HOME"', runOptions);
      assert.equal(r.stdout, 'user\n1000\n/home/user\n/home/user\n');
      const root = await sbx.commands.run('id -un; id -u', { ...runOptions, user: 'root' });
      assert.equal(root.stdout, 'root\n0\n');
    });

    await check('timeoutMs: a command past it ends in TimeoutError', async () => {
      await rejects(sbx.commands.run('sleep 600', { ...runOptions, timeoutMs: 3000 }),
        TimeoutError, 'sleep 600 with timeoutMs 3000');
    });

    await check('background: sendStdin, list, kill', async () => {
      let out = '';
      const h = await sbx.commands.run('cat', {
        ...runOptions,
        background: true,
        stdin: true,
        onStdout: (data) => { out += data; },
      });
      assert.ok(Number.isInteger(h.pid) && h.pid > 0, `pid ${h.pid}`);
      const end = endOf(h);
      await h.sendStdin('first line\n');
      await sbx.commands.sendStdin(h.pid, 'second line\n', runOptions);
      await eventually('cat echoed both lines', 120,
        () => out === 'first line\nsecond line\n' || end.ended);
      assert.equal(out, 'first line\nsecond line\n', endedEarly(h));
      const listed = (await sbx.commands.list(runOptions)).find((p) => p.pid === h.pid);
      assert.ok(listed, `pid ${h.pid} not in commands.list()`);
      assert.equal(listed.cmd, '/bin/bash');
      assert.deepEqual(listed.args, ['-l', '-c', 'cat']);
      assert.equal(await h.kill(), true);
      const e = await rejects(h.wait(), CommandExitError, 'wait() of a killed command');
      assert.notEqual(e.exitCode, 0);
      await eventually('the killed command left commands.list()', 60, async () =>
        !(await sbx.commands.list(runOptions)).some((p) => p.pid === h.pid));
      assert.equal(await sbx.commands.kill(h.pid, runOptions), false);
    });

    await check('closeStdin ends a command reading to EOF', async () => {
      const h = await sbx.commands.run('wc -c', { ...runOptions, background: true, stdin: true });
      await h.sendStdin('12345');
      await h.closeStdin();
      const r = await h.wait();
      assert.equal(r.stdout.trim(), '5');
    });

    await check('commands.connect: a disconnected command reattached', async () => {
      const h = await sbx.commands.run('cat', { ...runOptions, background: true, stdin: true });
      await h.disconnect();
      let out = '';
      const again = await sbx.commands.connect(h.pid, {
        ...runOptions,
        onStdout: (data) => { out += data; },
      });
      assert.equal(again.pid, h.pid);
      const end = endOf(again);
      await again.sendStdin('after reconnect\n');
      await eventually('the reattached handle saw the output', 120,
        () => out === 'after reconnect\n' || end.ended);
      assert.equal(out, 'after reconnect\n', endedEarly(again));
      assert.equal(await again.kill(), true);
    });

    await check('a process that does not exist: false or NotFoundError', async () => {
      assert.equal(await sbx.commands.kill(NO_SUCH_PID, runOptions), false);
      await rejects(sbx.commands.sendStdin(NO_SUCH_PID, 'x', runOptions), NotFoundError,
        'sendStdin to no process');
      await rejects(sbx.commands.connect(NO_SUCH_PID, runOptions), NotFoundError,
        'connect to no process');
    });
  } finally {
    await sbx.kill(sdkOptions);
  }
});
