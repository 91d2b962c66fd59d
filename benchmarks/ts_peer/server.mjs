// The TypeScript SDK's McpServer as the benchmarks' peer (benchmarks/_ts_peer.py):
//
//   node server.mjs stdio          one MCP session on stdin/stdout, until EOF
//   node server.mjs http PORT      Streamable HTTP at http://127.0.0.1:PORT/mcp (0: any free
//                                  port); prints "listening on URL" once it listens
//
// It serves the tools of benchmarks/_fastmcp_server.py with the same answers, so that one
// client drives and checks both:
//
//   create_session {}                    a new session id
//   create_goal {session_id, goal}       "Created goal gN: GOAL"
//   list_goals {session_id}              "No goals yet." or "Goals (N):\n- g1: GOAL\n..."
//
// The sessions live in the McpServer of one MCP session (over HTTP, a transport and a server
// per MCP session, as the SDK's README shows), so an id minted in one is unknown in another.
// Over HTTP: the SDK's createMcpExpressApp (Express with its JSON body parser and Host check),
// no event store (nothing to resume), no log line per request.

import { randomUUID } from 'node:crypto';

import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const USAGE = 'usage: node server.mjs stdio | node server.mjs http PORT';

const text = value => ({ content: [{ type: 'text', text: value }] });
const refusal = value => ({ ...text(value), isError: true });

function newServer() {
    const server = new McpServer({ name: 'ts-peer', version: '0.0.0' });
    const sessions = new Map(); // session id -> goals, in creation order

    server.registerTool('create_session', { description: 'Start a new session.', inputSchema: {} }, async () => {
        const id = randomUUID();
        sessions.set(id, []);
        return text(id);
    });
    server.registerTool(
        'create_goal',
        {
            description: "Create a goal in the session's plan and return its id.",
            inputSchema: { session_id: z.string(), goal: z.string() }
        },
        async ({ session_id: id, goal }) => {
            const goals = sessions.get(id);
            if (goals === undefined) {
                return refusal(`Error: session ${JSON.stringify(id)} not found`);
            }
            goals.push(goal);
            return text(`Created goal g${goals.length}: ${goal}`);
        }
    );
    server.registerTool(
        'list_goals',
        { description: "List the goals of the session's plan with their ids.", inputSchema: { session_id: z.string() } },
        async ({ session_id: id }) => {
            const goals = sessions.get(id);
            if (goals === undefined) {
                return refusal(`Error: session ${JSON.stringify(id)} not found`);
            }
            if (goals.length === 0) {
                return text('No goals yet.');
            }
            const lines = goals.map((goal, index) => `- g${index + 1}: ${goal}`);
            return text(`Goals (${lines.length}):\n${lines.join('\n')}`);
        }
    );
    return server;
}

const refuse = (res, status, message) => res.status(status).json({ jsonrpc: '2.0', error: { code: -32000, message }, id: null });

function serveHttp(port) {
    const app = createMcpExpressApp();
    const transports = new Map(); // Mcp-Session-Id -> its transport

    app.post('/mcp', async (req, res) => {
        const id = req.headers['mcp-session-id'];
        let transport = id === undefined ? undefined : transports.get(id);
        if (transport === undefined) {
            if (id !== undefined) {
                refuse(res, 404, 'Session not found');
                return;
            }
            if (!isInitializeRequest(req.body)) {
                refuse(res, 400, 'Bad Request: No valid session ID provided');
                return;
            }
            transport = new StreamableHTTPServerTransport({
                sessionIdGenerator: () => randomUUID(),
                onsessioninitialized: minted => transports.set(minted, transport)
            });
            transport.onclose = () => transports.delete(transport.sessionId);
            await newServer().connect(transport);
        }
        await transport.handleRequest(req, res, req.body);
    });
    // The stream for server-initiated messages (GET) and the end of a session (DELETE).
    const bySession = async (req, res) => {
        const transport = transports.get(req.headers['mcp-session-id']);
        if (transport === undefined) {
            refuse(res, 404, 'Session not found');
            return;
        }
        await transport.handleRequest(req, res);
    };
    app.get('/mcp', bySession);
    app.delete('/mcp', bySession);

    const listener = app.listen(port, '127.0.0.1', error => {
        if (error) {
            console.error(`cannot listen on 127.0.0.1:${port}: ${error.message}`);
            process.exit(1);
        }
        console.error(`listening on http://127.0.0.1:${listener.address().port}/mcp`);
    });
}

const [mode, port, ...rest] = process.argv.slice(2);
if (mode === 'stdio' && port === undefined) {
    await newServer().connect(new StdioServerTransport());
} else if (mode === 'http' && /^[0-9]{1,5}$/.test(port ?? '') && Number(port) <= 65535 && rest.length === 0) {
    serveHttp(Number(port));
} else {
    console.error(USAGE);
    process.exit(2);
}
