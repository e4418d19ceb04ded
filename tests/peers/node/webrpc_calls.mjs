// Calls Kiln's gRPC services through third-party browser/Node clients and
// prints what each answered, for tests/integration/server_grpcweb.sh to
// compare with the same calls over native gRPC:
//
//   connect-grpcweb-h1   @connectrpc/connect-node, gRPC-Web over HTTP/1.1
//                        (the protocol Grafana's connect-go client speaks)
//   connect-grpcweb-h2   the same over HTTP/2 (prior knowledge)
//   connect-proto        @connectrpc/connect-node, Connect protocol, binary
//   connect-json         @connectrpc/connect-node, Connect protocol, JSON
//   parca-grpcweb        @parca/client over @protobuf-ts/grpcweb-transport,
//   parca-grpcweb-text   binary and text: what Parca's web UI runs
//
// Usage: node --import ./webrpc_loader.mjs webrpc_calls.mjs BASE_URL \
//            DESCRIPTOR_SET CALLS_JSON [TOKEN]
// CALLS_JSON is [{"method": "Query", "request": {proto JSON}}, ...] for
// parca.query.v1alpha1.QueryService; the output (stdout) is
// {"transport": [{"ok": proto JSON} | {"error": "code: message"}, ...]}.
// Messages for @connectrpc come from the descriptor set protoc made from
// Kiln's proto/ files at test time; @parca/client brings its own.
import { readFileSync } from "node:fs";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { createFileRegistry, fromBinary, fromJson, toJson } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { GrpcWebFetchTransport } from "@protobuf-ts/grpcweb-transport";
import * as parca from "@parca/client";

const [baseUrl, descPath, callsPath, token] = process.argv.slice(2);
const calls = JSON.parse(readFileSync(callsPath, "utf8"));
const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(descPath)));
const service = registry.getService("parca.query.v1alpha1.QueryService");
const lower = (s) => s[0].toLowerCase() + s.slice(1);
const headers = token ? { authorization: `Bearer ${token}` } : {};

async function viaConnect(transport) {
	const client = createClient(service, transport);
	const out = [];
	for (const c of calls) {
		const m = service.methods.find((x) => x.name === c.method);
		try {
			const req = fromJson(m.input, c.request, { registry });
			const res = await client[lower(c.method)](req, { headers, timeoutMs: 60000 });
			out.push({ ok: toJson(m.output, res, { registry }) });
		} catch (e) {
			out.push({ error: `${e.code}: ${e.rawMessage ?? e.message}` });
		}
	}
	return out;
}

async function viaParca(format) {
	const transport = new GrpcWebFetchTransport({ baseUrl, format, meta: headers });
	const client = new parca.QueryServiceClient(transport);
	const out = [];
	for (const c of calls) {
		const m = parca.QueryService.methods.find((x) => x.name === c.method);
		try {
			const req = m.I.fromJson(c.request, { ignoreUnknownFields: true });
			const { response } = await client[lower(c.method)](req);
			out.push({ ok: m.O.toJson(response) });
		} catch (e) {
			out.push({ error: `${e.code}: ${e.message}` });
		}
	}
	return out;
}

const result = {};
result["connect-grpcweb-h1"] = await viaConnect(
	createGrpcWebTransport({ baseUrl, httpVersion: "1.1" }),
);
result["connect-grpcweb-h2"] = await viaConnect(createGrpcWebTransport({ baseUrl, httpVersion: "2" }));
result["connect-proto"] = await viaConnect(
	createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: true }),
);
result["connect-json"] = await viaConnect(
	createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false }),
);
result["parca-grpcweb"] = await viaParca("binary");
result["parca-grpcweb-text"] = await viaParca("text");
process.stdout.write(JSON.stringify(result));
