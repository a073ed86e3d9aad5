// SPDX-License-Identifier: Apache-2.0
/*
 * files.mjs - envd's filesystem service and /files through the unmodified
 * SDK: files.write (text, bytes, several files; parents made), read (text,
 * bytes), exists, getInfo, makeDir, list (depth 1 and 2), rename, remove,
 * watchDir, and FileNotFoundError for what is not there (but remove, which
 * envd lets succeed); the signed URLs of downloadUrl and uploadUrl fetched
 * by a plain fetch(), which names no sandbox (E2B_SANDBOX_URL is one
 * address for all), and refused once expired or tampered with.  One
 * sandbox; see checks.mjs for how checks fail.
 */
import assert from 'node:assert/strict';
import { FileNotFoundError, Sandbox } from 'e2b';
import { check, eventually, rejects, runOptions, script, sdkOptions } from './checks.mjs';

const dir = '/home/user/thaw-e2b';
const missing = '/home/user/thaw-e2b-missing/nothing';

script('files.mjs', async () => {
  const sbx = await Sandbox.create(sdkOptions);
  const files = sbx.files;
  console.log(`created ${sbx.sandboxId}`);

  try {
    await check('write a text file (parents made), read it back', async () => {
      const entry = await files.write(`${dir}/a.txt`, 'hello files\n', runOptions);
      assert.equal(entry.name, 'a.txt');
      assert.equal(entry.path, `${dir}/a.txt`);
      assert.equal(await files.read(`${dir}/a.txt`, runOptions), 'hello files\n');
    });

    await check('every byte value round trips (format bytes)', async () => {
      const bytes = new Uint8Array(4096).map((_, i) => (i * 7 + (i >> 8)) & 255);
      await files.write(`${dir}/bytes.bin`, bytes.buffer, runOptions);
      const back = await files.read(`${dir}/bytes.bin`, { ...runOptions, format: 'bytes' });
      assert.deepEqual(Buffer.from(back), Buffer.from(bytes));
    });

    await check('an empty file', async () => {
      await files.write(`${dir}/empty`, '', runOptions);
      assert.equal(await files.read(`${dir}/empty`, runOptions), '');
    });

    await check('the file is the command\'s too, owned by user', async () => {
      const r = await sbx.commands.run(`cat ${dir}/a.txt; stat -c %U ${dir}/a.txt`, runOptions);
      assert.equal(r.stdout, 'hello files\nuser\n');
    });

    await check('writeFiles: several in one request', async () => {
      const entries = await files.write([
        { path: `${dir}/many/one.txt`, data: '1' },
        { path: `${dir}/many/two.txt`, data: '22' },
      ], runOptions);
      assert.deepEqual(entries.map((e) => e.path).sort(), [`${dir}/many/one.txt`, `${dir}/many/two.txt`]);
      assert.equal(await files.read(`${dir}/many/two.txt`, runOptions), '22');
    });

    await check('exists and getInfo', async () => {
      assert.equal(await files.exists(`${dir}/a.txt`, runOptions), true);
      assert.equal(await files.exists(`${dir}/nope.txt`, runOptions), false);
      const info = await files.getInfo(`${dir}/a.txt`, runOptions);
      assert.equal(info.type, 'file');
      assert.equal(info.size, 12);
      assert.equal(info.name, 'a.txt');
      assert.equal((await files.getInfo(dir, runOptions)).type, 'dir');
    });

    await check('makeDir: true when made, false when there', async () => {
      assert.equal(await files.makeDir(`${dir}/sub/deeper`, runOptions), true);
      assert.equal(await files.makeDir(`${dir}/sub/deeper`, runOptions), false);
      assert.equal((await files.getInfo(`${dir}/sub/deeper`, runOptions)).type, 'dir');
    });

    await check('list: depth 1, then depth 2', async () => {
      const top = await files.list(dir, runOptions);
      const names = top.map((e) => `${e.name}:${e.type}`).sort();
      assert.deepEqual(names, ['a.txt:file', 'bytes.bin:file', 'empty:file', 'many:dir', 'sub:dir']);
      const deep = (await files.list(dir, { ...runOptions, depth: 2 })).map((e) => e.path);
      assert.ok(deep.includes(`${dir}/sub/deeper`), `depth 2: ${deep}`);
      assert.ok(deep.includes(`${dir}/many/one.txt`), `depth 2: ${deep}`);
    });

    await check('rename', async () => {
      const moved = await files.rename(`${dir}/a.txt`, `${dir}/b.txt`, runOptions);
      assert.equal(moved.path, `${dir}/b.txt`);
      assert.equal(await files.exists(`${dir}/a.txt`, runOptions), false);
      assert.equal(await files.read(`${dir}/b.txt`, runOptions), 'hello files\n');
    });

    await check('remove a file, then a directory with what it holds', async () => {
      await files.remove(`${dir}/b.txt`, runOptions);
      assert.equal(await files.exists(`${dir}/b.txt`, runOptions), false);
      await files.remove(`${dir}/many`, runOptions);
      assert.equal(await files.exists(`${dir}/many`, runOptions), false);
    });

    await check('watchDir: a file written in the directory is an event', async () => {
      const events = [];
      const watch = await files.watchDir(dir, (e) => events.push(e), runOptions);
      try {
        await files.write(`${dir}/watched.txt`, 'seen', runOptions);
        await eventually('an event for watched.txt', 120,
          () => events.some((e) => e.name === 'watched.txt' && (e.type === 'create' || e.type === 'write')));
      } finally {
        await watch.stop();
      }
    });

    await check('uploadUrl and downloadUrl: plain fetch() of the signed URLs', async () => {
      const up = await sbx.uploadUrl(`${dir}/signed.txt`);
      assert.match(up, /signature=v1_/);
      const form = new FormData();
      form.append('file', new Blob(['sent by url\n']), 'signed.txt');
      const put = await fetch(up, { method: 'POST', body: form });
      assert.equal(put.status, 200, await put.text());
      assert.equal(await files.read(`${dir}/signed.txt`, runOptions), 'sent by url\n');
      const down = await fetch(await sbx.downloadUrl(`${dir}/signed.txt`));
      assert.equal(down.status, 200);
      assert.equal(await down.text(), 'sent by url\n');
      const expiring = await sbx.downloadUrl(`${dir}/signed.txt`, { useSignatureExpiration: 600 });
      assert.match(expiring, /signature_expiration=/);
      assert.equal((await fetch(expiring)).status, 200);
    });

    await check('signed URLs: expired, tampered with, or for another path: 401', async () => {
      const expired = await sbx.downloadUrl(`${dir}/signed.txt`, { useSignatureExpiration: -60 });
      assert.equal((await fetch(expired)).status, 401);
      const url = new URL(await sbx.downloadUrl(`${dir}/signed.txt`));
      const signature = url.searchParams.get('signature');
      const tampered = new URL(url);
      tampered.searchParams.set('signature',
        signature.slice(0, 10) + (signature[10] === 'A' ? 'B' : 'A') + signature.slice(11));
      assert.equal((await fetch(tampered)).status, 401);
      const elsewhere = new URL(url);
      elsewhere.searchParams.set('path', `${dir}/a.txt`);
      assert.equal((await fetch(elsewhere)).status, 401);
      const upload = new URL(await sbx.uploadUrl(`${dir}/signed.txt`));
      const form = new FormData();
      form.append('file', new Blob(['x']), 'signed.txt');
      assert.equal((await fetch(upload, { method: 'GET' })).status, 401, 'a write URL read');
      assert.equal((await fetch(url, { method: 'POST', body: form })).status, 401, 'a read URL written');
      assert.equal(await files.read(`${dir}/signed.txt`, runOptions), 'sent by url\n');
    });

    await check('remove of what is not there succeeds, as envd\'s (Go\'s os.RemoveAll)', async () => {
      await files.remove(missing, runOptions);
    });

    await check('what is not there: FileNotFoundError', async () => {
      await rejects(files.read(missing, runOptions), FileNotFoundError, 'read');
      await rejects(files.getInfo(missing, runOptions), FileNotFoundError, 'getInfo');
      await rejects(files.list('/home/user/thaw-e2b-missing', runOptions), FileNotFoundError, 'list');
      await rejects(files.rename(missing, `${dir}/x`, runOptions), FileNotFoundError, 'rename');
      await rejects(files.watchDir('/home/user/thaw-e2b-missing', () => {}, runOptions),
        FileNotFoundError, 'watchDir');
    });
  } finally {
    await sbx.kill(sdkOptions);
  }
});
