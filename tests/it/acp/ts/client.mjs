// A small ACP client on the official TypeScript SDK (npm `@agentclientprotocol/sdk`, the one
// most editors' clients build on) that drives `flemmad acp` through a script of steps and
// prints what it saw as one JSON object. It speaks the same step language and prints the same
// report as ../client.py (the Python SDK's client), so tests/it/acp.rs runs one scenario with
// either SDK; see that file for the steps. Not every step is here: `prompt_and_leave`,
// `double_prompt` and `wait_for_chat` exist only in the Python client.
//
// Usage: node client.mjs FLEMMAD CWD STEPS_JSON
//
// Beyond client.py: STEPS_JSON may be {"capabilities": {...}, "steps": [...]} (with or without
// "buffers"): those client capabilities are advertised too, e.g. `session.compaction`, which
// the Python SDK does not know.
//
// It uses the SDK's `/unstable` entry point because `session/fork` is unstable in ACP; a
// `$/cancel_request` goes out the SDK's own way (aborting the request's cancellation signal).

import { spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";

import * as acp from "@agentclientprotocol/sdk/unstable";

const [flemmad, cwd, stepsJson] = process.argv.slice(2);
let steps = JSON.parse(stepsJson);

const recorder = {
  updates: [],
  permissions: [],
  answer: "allow_once",
  chunks: 0,
  cancelAfter: undefined,
  cancelRequestAfter: undefined,
  cancelWhenSeen: undefined,
  promptAbort: undefined,
  sessionId: undefined,
  buffers: undefined,
  fs: [],
  seen: [],
};

// An update as one line of the run's order (as client.py's `seen_entry`).
function seenEntry(update) {
  let entry = update.sessionUpdate;
  if (update.toolCallId !== undefined) entry += ` ${update.toolCallId}`;
  if (update.status !== undefined) entry += ` ${update.status}`;
  return entry;
}

let capabilities = {};
if (!Array.isArray(steps)) {
  if (steps.buffers !== undefined) {
    recorder.buffers = { ...steps.buffers };
    capabilities = { fs: { readTextFile: true, writeTextFile: true } };
  }
  // More client capabilities to advertise (`{"session": {"compaction": {}}}`).
  capabilities = { ...capabilities, ...(steps.capabilities ?? {}) };
  steps = steps.steps;
}

const child = spawn(flemmad, ["acp"], { cwd, env: process.env, stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

let agent;
const app = acp
  .client({ name: "flemmad-test-ts" })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    recorder.permissions.push({ toolCall: params.toolCall, options: params.options });
    if (recorder.answer === "cancel") {
      return { outcome: { outcome: "cancelled" } };
    }
    if (recorder.answer === "hold") {
      // Left open (as a user who has not looked yet) until the test releases it, then
      // rejected (as client.py's "hold").
      writeFileSync(recorder.askedMarker, "");
      return waitFor(() => existsSync(recorder.releaseMarker), "never released").then(() => ({
        outcome: { outcome: "selected", optionId: "reject_once" },
      }));
    }
    return { outcome: { outcome: "selected", optionId: recorder.answer } };
  })
  .onRequest(acp.methods.client.fs.readTextFile, ({ params }) => {
    if (recorder.buffers === undefined) throw acp.RequestError.methodNotFound("fs/read_text_file");
    recorder.fs.push({ method: "fs/read_text_file", path: params.path, sessionId: params.sessionId });
    recorder.seen.push(`fs/read_text_file ${params.path}`);
    if (params.path in recorder.buffers) return { content: recorder.buffers[params.path] };
    return { content: readFileSync(params.path, "utf8") };
  })
  .onRequest(acp.methods.client.fs.writeTextFile, ({ params }) => {
    if (recorder.buffers === undefined) throw acp.RequestError.methodNotFound("fs/write_text_file");
    recorder.fs.push({ method: "fs/write_text_file", path: params.path, sessionId: params.sessionId });
    recorder.seen.push(`fs/write_text_file ${params.path}`);
    recorder.buffers[params.path] = params.content;
    return {};
  })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    const update = params.update;
    recorder.updates.push(update);
    recorder.seen.push(seenEntry(update));
    if (recorder.cancelWhenSeen !== undefined && JSON.stringify(update).includes(recorder.cancelWhenSeen)) {
      recorder.cancelWhenSeen = undefined;
      void agent.notify(acp.methods.agent.session.cancel, { sessionId: params.sessionId });
    }
    if (update.sessionUpdate === "agent_message_chunk") {
      recorder.chunks += 1;
      if (recorder.chunks === recorder.cancelAfter) {
        void agent.notify(acp.methods.agent.session.cancel, { sessionId: params.sessionId });
      }
      if (recorder.chunks === recorder.cancelRequestAfter) {
        recorder.promptAbort?.abort();
      }
    }
  });

// Waits (30 s at most) until `done()` holds.
async function waitFor(done, failure) {
  for (let i = 0; i < 600; i += 1) {
    if (done()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(failure);
}

function blocksOf(step) {
  return step.blocks ?? [{ type: "text", text: step.text }];
}

const out = { steps: [] };
await app.connectWith(stream, async (context) => {
  agent = context;
  out.initialize = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: capabilities,
    clientInfo: { name: "flemmad-test-ts", version: "1" },
  });
  let sessionId;
  for (const step of steps) {
    recorder.updates = [];
    recorder.permissions = [];
    recorder.chunks = 0;
    recorder.answer = step.permission ?? "allow_once";
    recorder.cancelAfter = step.cancel_after_chunks;
    recorder.cancelRequestAfter = step.cancel_request_after_chunks;
    recorder.cancelWhenSeen = step.cancel_when_seen;
    recorder.askedMarker = step.asked_marker;
    recorder.releaseMarker = step.release_marker;
    const record = { op: step.op };
    try {
      switch (step.op) {
        case "new": {
          const response = await agent.request(acp.methods.agent.session.new, {
            cwd,
            mcpServers: step.mcpServers ?? [],
          });
          sessionId = response.sessionId;
          record.result = response;
          break;
        }
        case "load": {
          sessionId = step.session;
          record.result =
            (await agent.request(acp.methods.agent.session.load, { cwd, sessionId, mcpServers: [] })) ?? {};
          break;
        }
        case "prompt": {
          recorder.promptAbort = new AbortController();
          record.result = await agent.request(
            acp.methods.agent.session.prompt,
            { sessionId: step.session ?? sessionId, prompt: blocksOf(step) },
            { cancellationSignal: recorder.promptAbort.signal },
          );
          break;
        }
        case "resume": {
          sessionId = step.session ?? sessionId;
          record.result = await agent.request(acp.methods.agent.session.resume, { cwd, sessionId });
          break;
        }
        case "fork": {
          const params = { sessionId, cwd };
          if ("messages" in step) params._meta = { flemma: { messages: step.messages } };
          const response = await agent.request(acp.methods.agent.session.fork, params);
          sessionId = response.sessionId;
          record.result = response;
          break;
        }
        case "close":
          record.result = (await agent.request(acp.methods.agent.session.close, { sessionId })) ?? {};
          break;
        case "delete":
          record.result = (await agent.request(acp.methods.agent.session.delete, { sessionId })) ?? {};
          break;
        case "set_mode":
          record.result =
            (await agent.request(acp.methods.agent.session.setMode, { sessionId, modeId: step.mode })) ?? {};
          break;
        case "set_config_option":
          record.result = await agent.request(acp.methods.agent.session.setConfigOption, {
            sessionId,
            configId: step.config,
            value: step.value,
          });
          break;
        case "list":
          record.result = await agent.request(acp.methods.agent.session.list, { cwd });
          break;
        case "wait_for_update": {
          // Another front end's turn streams in (as client.py's step).
          const said = () =>
            recorder.updates
              .filter((u) => u.sessionUpdate === "agent_message_chunk")
              .map((u) => u.content?.text ?? "")
              .join("");
          await waitFor(
            () =>
              said().includes(step.contains) ||
              recorder.updates.some((u) => JSON.stringify(u).includes(step.contains)),
            `no update held ${step.contains}`,
          );
          if (step.marker !== undefined) writeFileSync(step.marker, "");
          record.result = {};
          break;
        }
        case "touch":
          writeFileSync(step.path, "");
          record.result = {};
          break;
        case "wait_for_file":
          await waitFor(() => existsSync(step.path), `${step.path} never appeared`);
          record.result = {};
          break;
        case "replace_in_chat": {
          const text = readFileSync(sessionId, "utf8");
          if (!text.includes(step.old)) throw new Error(`${step.old} not in the chat:\n${text}`);
          writeFileSync(sessionId, text.replace(step.old, step.new));
          record.result = {};
          break;
        }
        default:
          throw new Error(`the TypeScript client has no step ${step.op}`);
      }
    } catch (error) {
      if (!(error instanceof acp.RequestError)) throw error;
      record.error = { code: error.code, message: error.message, data: error.data ?? null };
    }
    // The SDK settles a request's promise as soon as its response is read, before it has run
    // the (async) handlers of notifications read just before it: the last updates of a prompt
    // reach an editor on this SDK a moment after the answer. One macrotask lets them run, so
    // the step's report holds every update flemmad sent before answering, as in client.py.
    await new Promise((resolve) => setImmediate(resolve));
    record.updates = [...recorder.updates];
    record.permissions = [...recorder.permissions];
    out.steps.push(record);
  }
});
if (recorder.buffers !== undefined) {
  out.fs = recorder.fs;
  out.buffers = recorder.buffers;
}
out.seen = recorder.seen;
child.stdin.end();
child.kill();
process.stdout.write(`${JSON.stringify(out)}\n`);
