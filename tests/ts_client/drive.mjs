// The official TypeScript MCP SDK client, driven by a plan: tests/_ts_client.py runs it.
//
//   node drive.mjs PLAN.json      a whole plan in a file: {"stdio"|"http": ..., "steps": [...]}
//   node drive.mjs < input        the same, or streamed: the first JSON value read is the
//                                 configuration, every later one a step or an array of steps
//
// By hand: `npm ci` in this folder first (node_modules/ is git-ignored); the tests run a
// copy beside an install under ~/.cache/mcp-actors-tests/ts_client/ instead.
//
// Input is JSON Lines; a value may also span lines (a pretty-printed file piped in). The
// configuration:
//
//   {"stdio": {"command", "args": [...], "cwd"?, "env"?: {...}}       spawn a server, or
//    "http": {"url", "headers"?: {"Authorization": "Bearer ..."}},     reach one
//    "clientInfo"?: {"name", "version"},
//    "capabilities"?: {"elicitation"?: bool|{...}, "sampling"?: bool|{...},
//                      "roots"?: bool|{"listChanged": bool}},
//    "onElicit"?: ANSWER | [ANSWER, ...],   e.g. {"action": "accept", "content": {...}},
//                                           {"action": "decline"}, {"action": "cancel"},
//                                           or {"error": {"code", "message"}} to refuse
//    "onSample"?: RESULT | [RESULT, ...],   a CreateMessageResult, or {"error": {...}}
//    "roots"?: [{"uri", "name"?}],          what roots/list answers
//    "requestTimeoutMs"?: 30000,            the SDK's per-request timeout (a step's
//                                           "timeoutMs" overrides it)
//    "terminateSession"?: true,             HTTP: DELETE the session when closing
//    "steps"?: [...]}
//
// A capability is declared when asked for, or when its answer policy is given; roots
// only when asked for. A list of answers is used in order, its last repeating.
//
// Output, on stdout, one JSON line each: first the connection,
//   {"op": "connect", "result": {serverInfo, capabilities, protocolVersion, sessionId, pid}}
//   or {"op": "connect", "error": {...}} (then nothing else runs, and the exit code is 0),
// then one line per step, in order,
//   {"step": N, "op": OP, "result": ...} or {"step": N, "op": OP, "error": {code, message,
//   data?, name}},
// (a step with "background": LABEL prints {"step", "op", "started": LABEL} at once), and,
// after the input ends, {"op": "close", "result": {}} or an error. `code` is the JSON-RPC
// error code (null for an error of the client itself); `name` is McpError, Timeout,
// PlanError (a step this script does not understand) or the JavaScript error's name.
// A failed step never stops the plan. The exit code is non-zero only for a bug here.
//
// Steps: {"op": NAME, ...arguments}. Every request step takes "meta" (the request's _meta)
// and "timeoutMs"; every list step takes "cursor".
//
//   serverInfo                        serverInfo, capabilities, instructions,
//                                     protocolVersion, sessionId (HTTP), pid (stdio)
//   ping
//   listTools
//   callTool {name, arguments?, progress?: bool}   progress: send a progressToken
//   listResources / listResourceTemplates
//   readResource {uri}
//   subscribe {uri} / unsubscribe {uri}
//   listPrompts
//   getPrompt {name, arguments?}
//   complete {ref, argument, context?}
//   setLoggingLevel {level}
//   request {method, params?}         any request; the result as the server sent it
//   notify {method, params?}          send any notification
//   waitFor {method, count?: 1, timeoutMs?: 10000, where?: {...}}
//                                     until `count` messages of `method` have arrived (and
//                                     not been taken by `notifications`), their params
//                                     containing `where` (a request's method, such as
//                                     elicitation/create, works too); the result:
//                                     {count, received}
//   notifications {method?, where?}   those received so far (all notifications without
//                                     `method`), then forgotten
//   elicitations / samplings / rootsRequests
//                                     the elicitation/create, sampling/createMessage or
//                                     roots/list requests received so far, then forgotten
//   setPolicy {onElicit?, onSample?}  answer later requests differently
//   await {label}                     the outcome of a step started with "background"
//   cancel {label, reason?}           cancel such a step (the SDK sends notifications/cancelled)
//
// What the server sends unasked (notifications, and requests such as elicitation/create,
// even ones the client declared no capability for) is kept as {"method", "params"}, in
// arrival order, as it came off the wire (a progress notification's params keep their
// progressToken).

import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
    CreateMessageRequestSchema,
    ElicitRequestSchema,
    ListRootsRequestSchema,
    McpError,
    ResultSchema
} from '@modelcontextprotocol/sdk/types.js';

// stdout carries results only: anything the SDK or a dependency logs goes to stderr.
console.log = console.error;
console.info = console.error;
console.debug = console.error;

const ELICIT = 'elicitation/create';
const SAMPLE = 'sampling/createMessage';
const ROOTS = 'roots/list';
const DEFAULT_WAIT_MS = 10000;
const DEFAULT_SAMPLE = {
    role: 'assistant',
    content: { type: 'text', text: '' },
    model: 'ts-client-fixed',
    stopReason: 'endTurn'
};

class PlanError extends Error {
    name = 'PlanError';
}

class Timeout extends Error {
    name = 'Timeout';
}

function emit(line) {
    process.stdout.write(JSON.stringify(line) + '\n');
}

function describe(error) {
    if (error instanceof McpError) {
        const prefix = `MCP error ${error.code}: `;
        const message = error.message.startsWith(prefix) ? error.message.slice(prefix.length) : error.message;
        return {
            code: error.code,
            message,
            ...(error.data === undefined ? {} : { data: error.data }),
            name: 'McpError'
        };
    }
    const code = typeof error?.code === 'number' ? error.code : null;
    return { code, message: String(error?.message ?? error), name: error?.name ?? 'Error' };
}

/** Whether `value` contains `pattern`: every key of an object pattern, recursively; else equal. */
function contains(value, pattern) {
    if (pattern === undefined) {
        return true;
    }
    if (pattern === null || typeof pattern !== 'object') {
        return value === pattern;
    }
    if (value === null || typeof value !== 'object') {
        return false;
    }
    return Object.entries(pattern).every(([key, wanted]) => contains(value[key], wanted));
}

/** A policy's answers in order, the last one repeating. */
class Answers {
    constructor(policy, fallback) {
        this.queue = policy === undefined ? [fallback] : Array.isArray(policy) ? [...policy] : [policy];
        if (this.queue.length === 0) {
            throw new PlanError('an answer policy needs at least one answer');
        }
    }

    next() {
        const answer = this.queue.length > 1 ? this.queue.shift() : this.queue[0];
        if (answer.error !== undefined) {
            throw new McpError(answer.error.code ?? -32603, answer.error.message ?? 'refused', answer.error.data);
        }
        return structuredClone(answer);
    }
}

/** JSON values from a stream: one per line, or spanning lines until they parse. */
async function* jsonValues(stream) {
    let buffer = '';
    let pending = '';
    stream.setEncoding('utf8');
    for await (const chunk of stream) {
        buffer += chunk;
        let newline;
        while ((newline = buffer.indexOf('\n')) >= 0) {
            const line = buffer.slice(0, newline);
            buffer = buffer.slice(newline + 1);
            pending += line + '\n';
            if (pending.trim() === '') {
                pending = '';
                continue;
            }
            let value;
            try {
                value = JSON.parse(pending);
            } catch {
                continue; // a value that spans lines: read on
            }
            pending = '';
            yield value;
        }
    }
    pending += buffer;
    if (pending.trim() !== '') {
        yield JSON.parse(pending);
    }
}

class Driver {
    constructor(config) {
        this.config = config;
        this.inbox = [];
        this.waiters = new Set();
        this.background = new Map();
        this.protocolVersion = undefined;
        this.elicit = new Answers(config.onElicit, { action: 'decline' });
        this.sample = new Answers(config.onSample, DEFAULT_SAMPLE);
        const wanted = config.capabilities ?? {};
        const capabilities = {};
        const declare = (name, asked, policy) => {
            if (asked === true || (asked === undefined && policy !== undefined)) {
                capabilities[name] = {};
            } else if (asked && typeof asked === 'object') {
                capabilities[name] = asked;
            }
        };
        declare('elicitation', wanted.elicitation, config.onElicit);
        declare('sampling', wanted.sampling, config.onSample);
        declare('roots', wanted.roots, undefined);
        if (wanted.experimental) {
            capabilities.experimental = wanted.experimental;
        }
        this.client = new Client(config.clientInfo ?? { name: 'mcp-actors-ts-client', version: '0.0.0' }, {
            capabilities
        });
        this.client.onerror = error => console.error('[drive.mjs] client error:', error);
        if (capabilities.elicitation) {
            this.client.setRequestHandler(ElicitRequestSchema, async () => this.elicit.next());
        }
        if (capabilities.sampling) {
            this.client.setRequestHandler(CreateMessageRequestSchema, async () => this.sample.next());
        }
        if (capabilities.roots) {
            this.client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: config.roots ?? [] }));
        }
    }

    transport() {
        const { stdio, http } = this.config;
        if ((stdio === undefined) === (http === undefined)) {
            throw new PlanError('the configuration needs exactly one of "stdio" and "http"');
        }
        let transport;
        if (stdio !== undefined) {
            transport = new StdioClientTransport({
                command: stdio.command,
                args: stdio.args ?? [],
                cwd: stdio.cwd,
                env: stdio.env,
                stderr: 'inherit'
            });
        } else {
            transport = new StreamableHTTPClientTransport(new URL(http.url), {
                requestInit: { headers: http.headers ?? {} }
            });
        }
        // Everything the server sends unasked is recorded as it arrives, before the SDK
        // dispatches it (the client chains this handler): the SDK's own progress callback
        // misses progress that arrives together with the response.
        transport.onmessage = message => {
            if (typeof message.method === 'string') {
                this.receive(message);
            }
        };
        // The client tells a transport the negotiated version; stdio's does not keep it.
        const setProtocolVersion = transport.setProtocolVersion?.bind(transport);
        transport.setProtocolVersion = version => {
            this.protocolVersion = version;
            setProtocolVersion?.(version);
        };
        return transport;
    }

    receive(message) {
        this.inbox.push({ method: message.method, params: message.params ?? {} });
        for (const waiter of this.waiters) {
            waiter();
        }
    }

    matching(method, where) {
        return this.inbox.filter(message => message.method === method && contains(message.params, where));
    }

    take(test) {
        const taken = this.inbox.filter(test);
        this.inbox = this.inbox.filter(message => !test(message));
        return taken;
    }

    info() {
        const transport = this.client.transport;
        return {
            serverInfo: this.client.getServerVersion() ?? null,
            capabilities: this.client.getServerCapabilities() ?? null,
            instructions: this.client.getInstructions() ?? null,
            protocolVersion: this.protocolVersion ?? null,
            sessionId: transport?.sessionId ?? null,
            pid: transport?.pid ?? null
        };
    }

    async connect() {
        this.transportInUse = this.transport();
        await this.client.connect(this.transportInUse, { timeout: this.config.requestTimeoutMs });
        return this.info();
    }

    async waitFor(step) {
        const method = required(step, 'method');
        const count = step.count ?? 1;
        const timeoutMs = step.timeoutMs ?? DEFAULT_WAIT_MS;
        const done = () => this.matching(method, step.where).length >= count;
        if (!done()) {
            await new Promise((resolve, reject) => {
                const timer = setTimeout(() => {
                    this.waiters.delete(check);
                    const got = this.matching(method, step.where).length;
                    reject(new Timeout(`waited ${timeoutMs} ms for ${count} ${method}, received ${got}`));
                }, timeoutMs);
                const check = () => {
                    if (done()) {
                        clearTimeout(timer);
                        this.waiters.delete(check);
                        resolve();
                    }
                };
                this.waiters.add(check);
            });
        }
        const received = this.matching(method, step.where);
        return { count: received.length, received };
    }

    options(step, signal) {
        const options = {};
        const timeout = step.timeoutMs ?? this.config.requestTimeoutMs;
        if (timeout !== undefined) {
            options.timeout = timeout;
        }
        if (signal !== undefined) {
            options.signal = signal;
        }
        if (step.progress) {
            options.onprogress = () => {}; // asks for progress: a progressToken in _meta
        }
        return options;
    }

    async run(step, signal) {
        const client = this.client;
        const options = this.options(step, signal);
        const params = fields => {
            const chosen = {};
            for (const field of fields) {
                if (step[field] !== undefined) {
                    chosen[field] = step[field];
                }
            }
            if (step.meta !== undefined) {
                chosen._meta = step.meta;
            }
            return chosen;
        };
        switch (step.op) {
            case 'serverInfo':
                return this.info();
            case 'ping':
                return client.ping(options);
            case 'listTools':
                return client.listTools(params(['cursor']), options);
            case 'callTool':
                required(step, 'name');
                return client.callTool({ arguments: {}, ...params(['name', 'arguments']) }, undefined, options);
            case 'listResources':
                return client.listResources(params(['cursor']), options);
            case 'listResourceTemplates':
                return client.listResourceTemplates(params(['cursor']), options);
            case 'readResource':
                required(step, 'uri');
                return client.readResource(params(['uri']), options);
            case 'subscribe':
                required(step, 'uri');
                return client.subscribeResource(params(['uri']), options);
            case 'unsubscribe':
                required(step, 'uri');
                return client.unsubscribeResource(params(['uri']), options);
            case 'listPrompts':
                return client.listPrompts(params(['cursor']), options);
            case 'getPrompt':
                required(step, 'name');
                return client.getPrompt(params(['name', 'arguments']), options);
            case 'complete':
                required(step, 'ref');
                required(step, 'argument');
                return client.complete(params(['ref', 'argument', 'context']), options);
            case 'setLoggingLevel':
                return client.setLoggingLevel(required(step, 'level'), options);
            case 'request':
                return client.request(
                    { method: required(step, 'method'), params: { ...(step.params ?? {}), ...params([]) } },
                    ResultSchema,
                    options
                );
            case 'notify':
                await client.notification({ method: required(step, 'method'), params: step.params });
                return {};
            case 'waitFor':
                return this.waitFor(step);
            case 'notifications': {
                const method = step.method;
                return this.take(
                    message =>
                        (method === undefined ? message.method.startsWith('notifications/') : message.method === method) &&
                        contains(message.params, step.where)
                );
            }
            case 'elicitations':
                return this.take(message => message.method === ELICIT);
            case 'samplings':
                return this.take(message => message.method === SAMPLE);
            case 'rootsRequests':
                return this.take(message => message.method === ROOTS);
            case 'setPolicy':
                if (step.onElicit !== undefined) {
                    this.elicit = new Answers(step.onElicit);
                }
                if (step.onSample !== undefined) {
                    this.sample = new Answers(step.onSample);
                }
                return {};
            case 'await': {
                const started = this.started(step);
                this.background.delete(step.label);
                return started.promise;
            }
            case 'cancel':
                this.started(step).controller.abort(step.reason ?? 'cancelled by the plan');
                return {};
            default:
                throw new PlanError(`unknown step ${JSON.stringify(step.op)}`);
        }
    }

    started(step) {
        const started = this.background.get(required(step, 'label'));
        if (started === undefined) {
            throw new PlanError(`no step runs in the background as ${JSON.stringify(step.label)}`);
        }
        return started;
    }

    async step(step, index) {
        const op = step?.op;
        if (typeof step !== 'object' || step === null || Array.isArray(step) || typeof op !== 'string') {
            emit({ step: index, op: op ?? null, error: describe(new PlanError(`not a step: ${JSON.stringify(step)}`)) });
            return;
        }
        if (step.background !== undefined) {
            const label = step.background;
            if (this.background.has(label)) {
                emit({ step: index, op, error: describe(new PlanError(`label ${JSON.stringify(label)} is in use`)) });
                return;
            }
            const controller = new AbortController();
            const promise = this.run(step, controller.signal);
            promise.catch(() => {}); // its outcome is read by "await", or never
            this.background.set(label, { controller, promise });
            emit({ step: index, op, started: label });
            return;
        }
        try {
            emit({ step: index, op, result: (await this.run(step)) ?? {} });
        } catch (error) {
            emit({ step: index, op, error: describe(error) });
        }
    }

    async close() {
        try {
            if (this.config.http !== undefined && this.config.terminateSession !== false) {
                await this.transportInUse.terminateSession();
            }
            await this.client.close();
            emit({ op: 'close', result: {} });
        } catch (error) {
            emit({ op: 'close', error: describe(error) });
            await this.client.close().catch(() => {});
        }
    }
}

function required(step, field) {
    if (step[field] === undefined) {
        throw new PlanError(`step ${step.op} needs "${field}"`);
    }
    return step[field];
}

async function* inputs() {
    const file = process.argv[2];
    if (file !== undefined) {
        yield JSON.parse(readFileSync(file, 'utf8'));
        return;
    }
    yield* jsonValues(process.stdin);
}

async function main() {
    const values = inputs()[Symbol.asyncIterator]();
    const first = await values.next();
    if (first.done) {
        throw new Error('no configuration on the input');
    }
    const config = first.value;
    let driver;
    try {
        driver = new Driver(config);
        emit({ op: 'connect', result: await driver.connect() });
    } catch (error) {
        emit({ op: 'connect', error: describe(error) });
        await driver?.client.close().catch(() => {});
        return;
    }
    let index = 0;
    for (const step of config.steps ?? []) {
        await driver.step(step, index++);
    }
    for (let next = await values.next(); !next.done; next = await values.next()) {
        for (const step of Array.isArray(next.value) ? next.value : [next.value]) {
            await driver.step(step, index++);
        }
    }
    await driver.close();
}

main().then(
    () => process.exit(0),
    error => {
        console.error('[drive.mjs] harness bug:', error);
        process.exit(2);
    }
);
