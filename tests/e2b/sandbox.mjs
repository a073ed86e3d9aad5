// SPDX-License-Identifier: Apache-2.0
/*
 * sandbox.mjs - E2B's control plane through the unmodified SDK:
 * Sandbox.create() (template `base`, metadata, envs), isRunning, getInfo,
 * setTimeout, Sandbox.list (metadata and state filters), Sandbox.connect,
 * pause and resume (a file kept across them), fork, createSnapshot with
 * listSnapshots, a sandbox of the snapshot and deleteSnapshot, kill, and
 * the errors the SDK turns thaw's answers into: a wrong API key, an unknown
 * template, a sandbox that is gone.  One sandbox (and a fork and a copy,
 * briefly); see checks.mjs for how checks fail.
 */
import assert from 'node:assert/strict';
import {
  AuthenticationError,
  Sandbox,
  SandboxError,
  SandboxNotFoundError,
} from 'e2b';
import { check, eventually, rejects, runOptions, script, sdkOptions } from './checks.mjs';

const run = `thaw-e2b-${process.pid}-${Date.now()}`;

async function listed(query) {
  const paginator = Sandbox.list({ ...sdkOptions, query });
  const ids = [];
  while (paginator.hasNext)
    for (const info of await paginator.nextItems())
      ids.push(info.sandboxId);
  return ids;
}

script('sandbox.mjs', async () => {
  const sbx = await Sandbox.create({
    ...sdkOptions,
    metadata: { suite: 'thaw-e2b', run },
    envs: { THAW_E2B_FROM_CREATE: 'set at create' },
  });
  const id = sbx.sandboxId;
  let snapshot;
  console.log(`created ${id}`);

  try {
    await check('create: an id, and the sandbox runs', async () => {
      assert.equal(typeof id, 'string');
      assert.ok(id.length > 0, 'empty sandboxId');
      assert.equal(await sbx.isRunning(sdkOptions), true);
    });

    let endAt;
    await check('getInfo: id, template, metadata, state, times', async () => {
      const info = await sbx.getInfo(sdkOptions);
      assert.equal(info.sandboxId, id);
      assert.equal(typeof info.templateId, 'string');
      assert.ok(info.templateId.length > 0, 'empty templateId');
      assert.deepEqual(info.metadata, { suite: 'thaw-e2b', run });
      assert.equal(info.state, 'running');
      assert.ok(!isNaN(info.startedAt), `startedAt ${info.startedAt}`);
      assert.ok(info.endAt > info.startedAt, `endAt ${info.endAt} not after startedAt ${info.startedAt}`);
      assert.ok(info.endAt > new Date(), `endAt ${info.endAt} already past`);
      endAt = info.endAt;
    });

    await check('create envs reach commands', async () => {
      const r = await sbx.commands.run('echo "$THAW_E2B_FROM_CREATE"', runOptions);
      assert.equal(r.stdout, 'set at create\n');
    });

    await check('setTimeout moves endAt', async () => {
      await sbx.setTimeout(sdkOptions.timeoutMs * 2, sdkOptions);
      const info = await sbx.getInfo(sdkOptions);
      assert.ok(endAt, 'no endAt from getInfo to compare with');
      assert.ok(info.endAt > endAt, `endAt ${info.endAt} not after ${endAt}`);
    });

    await check('Sandbox.list: found by metadata, not by other metadata', async () => {
      assert.deepEqual(await listed({ metadata: { run } }), [id]);
      assert.deepEqual(await listed({ metadata: { run: run + '-other' } }), []);
      assert.ok((await listed({ state: ['running'] })).includes(id), 'not listed as running');
    });

    await check('Sandbox.connect: the same sandbox, commands through it', async () => {
      const again = await Sandbox.connect(id, sdkOptions);
      assert.equal(again.sandboxId, id);
      const r = await again.commands.run('echo connected', runOptions);
      assert.equal(r.stdout, 'connected\n');
    });

    await check('pause: paused, listed as paused, a second pause is false', async () => {
      await sbx.commands.run('echo kept > /tmp/thaw-e2b-kept', runOptions);
      assert.equal(await sbx.pause(sdkOptions), true);
      assert.equal((await sbx.getInfo(sdkOptions)).state, 'paused');
      assert.ok((await listed({ state: ['paused'] })).includes(id), 'not listed as paused');
      assert.ok(!(await listed({ state: ['running'] })).includes(id), 'still listed as running');
      assert.equal(await sbx.pause(sdkOptions), false);
    });

    await check('resume (Sandbox.connect): running, memory and files kept', async () => {
      const resumed = await Sandbox.connect(id, sdkOptions);
      assert.equal((await resumed.getInfo(sdkOptions)).state, 'running');
      assert.equal(await resumed.isRunning(sdkOptions), true);
      const r = await resumed.commands.run('cat /tmp/thaw-e2b-kept', runOptions);
      assert.equal(r.stdout, 'kept\n');
    });

    await check('fork: a running copy with the files', async () => {
      await sbx.commands.run('echo before fork > /tmp/thaw-e2b-fork', runOptions);
      const forks = await sbx.fork({ ...sdkOptions, count: 1 });
      assert.equal(forks.length, 1);
      const [fork] = forks;
      assert.ok(fork instanceof Sandbox, `the fork failed: ${fork}`);
      try {
        assert.notEqual(fork.sandboxId, id);
        const r = await fork.commands.run('cat /tmp/thaw-e2b-fork', runOptions);
        assert.equal(r.stdout, 'before fork\n');
        assert.equal((await sbx.getInfo(sdkOptions)).state, 'running', 'the forked one');
      } finally {
        await fork.kill(sdkOptions);
      }
    });

    await check('createSnapshot: listed, and a sandbox created from it has the files', async () => {
      await sbx.commands.run('echo before snapshot > /tmp/thaw-e2b-snapshot', runOptions);
      snapshot = await sbx.createSnapshot(sdkOptions);
      assert.equal(typeof snapshot.snapshotId, 'string');
      assert.ok(snapshot.snapshotId.length > 0, 'empty snapshotId');
      const ids = [];
      const paginator = sbx.listSnapshots(sdkOptions);
      while (paginator.hasNext)
        for (const s of await paginator.nextItems())
          ids.push(s.snapshotId);
      assert.ok(ids.includes(snapshot.snapshotId), `${snapshot.snapshotId} not in ${ids}`);
      const copy = await Sandbox.create(snapshot.snapshotId, sdkOptions);
      try {
        const r = await copy.commands.run('cat /tmp/thaw-e2b-snapshot', runOptions);
        assert.equal(r.stdout, 'before snapshot\n');
      } finally {
        await copy.kill(sdkOptions);
      }
    });

    await check('a wrong API key: AuthenticationError', async () => {
      await rejects(Sandbox.list({ ...sdkOptions, apiKey: 'not-the-token' }).nextItems(),
        AuthenticationError, 'Sandbox.list with a wrong key');
      await rejects(Sandbox.getInfo(id, { ...sdkOptions, apiKey: 'not-the-token' }),
        AuthenticationError, 'getInfo with a wrong key');
    });

    await check('an unknown template: a 404 SandboxError', async () => {
      const err = await rejects(Sandbox.create('thaw-e2b-no-such-template', sdkOptions),
        SandboxError, 'create from an unknown template');
      assert.equal(err.statusCode, 404, err.message);
    });
  } finally {
    await check('kill: true, then the sandbox is gone', async () => {
      assert.equal(await sbx.kill(sdkOptions), true);
      await eventually('isRunning() false after kill', 60,
        async () => !(await sbx.isRunning(sdkOptions)));
    });
  }

  await check('a killed sandbox: the SDK\'s not-found answers', async () => {
    assert.equal(await Sandbox.kill(id, sdkOptions), false);
    await rejects(Sandbox.getInfo(id, sdkOptions), SandboxNotFoundError, 'getInfo');
    await rejects(Sandbox.setTimeout(id, 60_000, sdkOptions), SandboxNotFoundError, 'setTimeout');
    await rejects(Sandbox.connect(id, sdkOptions), SandboxNotFoundError, 'connect');
    await rejects(Sandbox.pause(id, sdkOptions), SandboxNotFoundError, 'pause');
    await rejects(sbx.commands.run('true', runOptions), SandboxNotFoundError, 'commands.run');
    assert.ok(!(await listed({ metadata: { run } })).includes(id), 'still listed');
  });

  await check('deleteSnapshot once no sandbox uses it: true, then false', async () => {
    assert.ok(snapshot, 'no snapshot from the createSnapshot check');
    assert.equal(await Sandbox.deleteSnapshot(snapshot.snapshotId, sdkOptions), true);
    assert.equal(await Sandbox.deleteSnapshot(snapshot.snapshotId, sdkOptions), false);
  });
});
