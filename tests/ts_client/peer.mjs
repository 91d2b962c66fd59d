// A small MCP server on stdio, made with the same TypeScript SDK, that uses every feature
// drive.mjs can drive: the harness's own tests run plans against it, so that the steps the
// project's server does not serve yet (resources, prompts, logging, elicitation, sampling,
// progress, cancellation) are known to work in the harness before they are needed.
//
//   resources   memo://pad (text: what `write` wrote last; subscribable), and the
//               template memo://{name} (completes `name` from pad, pages)
//   prompts     greet {name}
//   tools       write {text}        sets the pad; notifications/resources/updated to a
//                                   subscriber of memo://pad
//               log {level, text}   notifications/message (the logging level applies)
//               ask {question}      elicitation/create; the answer as JSON text
//               sample {prompt}     sampling/createMessage; the answer as JSON text
//               count {n}           n notifications/progress, when the call asks for them
//               hold {}             answers only when cancelled (or after a minute)

import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { SubscribeRequestSchema, UnsubscribeRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const PAD = 'memo://pad';
const server = new McpServer(
    { name: 'ts-peer', version: '0.0.0' },
    { capabilities: { logging: {}, resources: { subscribe: true, listChanged: true } } }
);
const subscribed = new Set();
let pad = '';

const text = value => ({ content: [{ type: 'text', text: typeof value === 'string' ? value : JSON.stringify(value) }] });

server.registerResource('pad', PAD, { mimeType: 'text/plain' }, async uri => ({
    contents: [{ uri: uri.href, mimeType: 'text/plain', text: pad }]
}));
server.registerResource(
    'memo',
    new ResourceTemplate('memo://{name}', {
        list: undefined,
        complete: { name: value => ['pad', 'pages'].filter(name => name.startsWith(value)) }
    }),
    { mimeType: 'text/plain' },
    async (uri, { name }) => ({ contents: [{ uri: uri.href, text: name === 'pad' ? pad : '' }] })
);
server.server.setRequestHandler(SubscribeRequestSchema, async request => {
    subscribed.add(request.params.uri);
    return {};
});
server.server.setRequestHandler(UnsubscribeRequestSchema, async request => {
    subscribed.delete(request.params.uri);
    return {};
});

server.registerPrompt('greet', { description: 'Greet someone.', argsSchema: { name: z.string() } }, ({ name }) => ({
    messages: [{ role: 'user', content: { type: 'text', text: `Say hello to ${name}.` } }]
}));

server.registerTool('write', { inputSchema: { text: z.string() } }, async ({ text: written }) => {
    pad = written;
    if (subscribed.has(PAD)) {
        await server.server.sendResourceUpdated({ uri: PAD });
    }
    return text('written');
});
server.registerTool('log', { inputSchema: { level: z.string(), text: z.string() } }, async ({ level, text: data }) => {
    await server.sendLoggingMessage({ level, logger: 'peer', data });
    return text('logged');
});
server.registerTool('ask', { inputSchema: { question: z.string() } }, async ({ question }) => {
    const answer = await server.server.elicitInput({
        message: question,
        requestedSchema: { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] }
    });
    return text(answer);
});
server.registerTool('sample', { inputSchema: { prompt: z.string() } }, async ({ prompt }) => {
    const answer = await server.server.createMessage({
        messages: [{ role: 'user', content: { type: 'text', text: prompt } }],
        maxTokens: 10
    });
    return text(answer);
});
server.registerTool('count', { inputSchema: { n: z.number().int() } }, async ({ n }, extra) => {
    const progressToken = extra._meta?.progressToken;
    for (let progress = 1; progress <= n && progressToken !== undefined; progress++) {
        await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress, total: n } });
    }
    return text(`counted to ${n}`);
});
server.registerTool('hold', { inputSchema: {} }, async (_arguments, extra) => {
    await new Promise(resolve => {
        const timer = setTimeout(resolve, 60000);
        extra.signal.addEventListener('abort', () => {
            clearTimeout(timer);
            resolve();
        });
    });
    return text('released');
});

await server.connect(new StdioServerTransport());
