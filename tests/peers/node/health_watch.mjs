// grpc.health.v1.Health/Watch through @connectrpc/connect-node, for
// tests/integration/server_grpcweb_watch.sh: prints each status as it
// arrives, one per line, then "END <code>" when the stream ends ("END OK"
// for a clean end).
//
// Usage: node health_watch.mjs BASE_URL DESCRIPTOR_SET TRANSPORT [SERVICE]
// TRANSPORT: grpcweb-h1, grpcweb-h2 (gRPC-Web over HTTP/1.1 or HTTP/2),
// connect-h1, connect-h2 (Connect streaming, binary), connect-json-h1;
// protobuf-ts-binary, protobuf-ts-text: @protobuf-ts/grpcweb-transport
// (Parca's web UI's transport, on Node's fetch), binary and text.
import { readFileSync } from "node:fs";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { createFileRegistry, fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { GrpcWebFetchTransport } from "@protobuf-ts/grpcweb-transport";
import { ServiceType } from "@protobuf-ts/runtime-rpc";
import { MessageType } from "@protobuf-ts/runtime";

const [baseUrl, descPath, which, service = ""] = process.argv.slice(2);
const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(descPath)));
const health = registry.getService("grpc.health.v1.Health");
const statusEnum = registry.getEnum("grpc.health.v1.HealthCheckResponse.ServingStatus");
const transports = {
	"grpcweb-h1": () => createGrpcWebTransport({ baseUrl, httpVersion: "1.1" }),
	"grpcweb-h2": () => createGrpcWebTransport({ baseUrl, httpVersion: "2" }),
	"connect-h1": () => createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: true }),
	"connect-h2": () => createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: true }),
	"connect-json-h1": () =>
		createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false }),
};
// protobuf-ts needs its own message types: health.proto's two messages.
async function viaProtobufTs(format) {
	const Req = new MessageType("grpc.health.v1.HealthCheckRequest", [
		{ no: 1, name: "service", kind: "scalar", T: 9 },
	]);
	const Res = new MessageType("grpc.health.v1.HealthCheckResponse", [
		{ no: 1, name: "status", kind: "enum", T: () => ["grpc.health.v1.ServingStatus", {}] },
	]);
	const Health = new ServiceType("grpc.health.v1.Health", [
		{ name: "Watch", serverStreaming: true, options: {}, I: Req, O: Res },
	]);
	const t = new GrpcWebFetchTransport({ baseUrl, format });
	const call = t.serverStreaming(Health.methods[0], Req.create({ service }), t.mergeOptions({}));
	try {
		for await (const res of call.responses)
			process.stdout.write(`${statusEnum.values.find((v) => v.number === res.status).name}\n`);
		const st = await call.status;
		process.stdout.write(`END ${st.code}\n`);
	} catch (e) {
		process.stdout.write(`END ${e.code}: ${e.message}\n`);
	}
}
if (which.startsWith("protobuf-ts-")) {
	await viaProtobufTs(which.slice("protobuf-ts-".length));
	process.exit(0);
}
if (!transports[which]) {
	process.stderr.write(`unknown transport ${which}\n`);
	process.exit(2);
}
const client = createClient(health, transports[which]());
let code = "OK";
try {
	for await (const res of client.watch({ service })) {
		process.stdout.write(`${statusEnum.values.find((v) => v.number === res.status).name}\n`);
	}
} catch (e) {
	code = `${e.code}: ${e.rawMessage ?? e.message}`;
}
process.stdout.write(`END ${code}\n`);
