# tests/lib/clickhouse.bash — a throwaway ClickHouse server for tests and
# benches: Debian's clickhouse-server (18.16, installed by scripts/deps.sh),
# in a temporary directory, listening on loopback only, on free ports.
#
#   ch_start DIR     starts it with its data under DIR; sets CH_URL, CH_PID
#   ch_stop          stops it (SIGTERM, then SIGKILL), keeps the data
#   ch_query SQL     runs SQL over HTTP, prints the answer
#
# The server runs as the clickhouse user (it refuses to run as root with
# a data directory root owns), so DIR is handed to that user.

ch_free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

ch_available() {
	command -v clickhouse-server >/dev/null && id clickhouse >/dev/null 2>&1
}

ch_start() {
	local dir=$1
	mkdir -p "$dir/data" "$dir/tmp" "$dir/user_files" "$dir/log"
	if [ -z "${CH_HTTP_PORT:-}" ]; then
		CH_HTTP_PORT=$(ch_free_port)
		CH_TCP_PORT=$(ch_free_port)
	fi
	cat >"$dir/config.xml" <<XML
<yandex>
    <logger><level>warning</level><log>$dir/log/server.log</log><errorlog>$dir/log/error.log</errorlog><size>100M</size><count>2</count></logger>
    <http_port>$CH_HTTP_PORT</http_port>
    <tcp_port>$CH_TCP_PORT</tcp_port>
    <listen_host>127.0.0.1</listen_host>
    <max_connections>4096</max_connections>
    <keep_alive_timeout>3</keep_alive_timeout>
    <max_concurrent_queries>100</max_concurrent_queries>
    <uncompressed_cache_size>1073741824</uncompressed_cache_size>
    <mark_cache_size>536870912</mark_cache_size>
    <path>$dir/data/</path>
    <tmp_path>$dir/tmp/</tmp_path>
    <user_files_path>$dir/user_files/</user_files_path>
    <users_config>$dir/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mlock_executable>false</mlock_executable>
    <compression><case><min_part_size>0</min_part_size><min_part_size_ratio>0</min_part_size_ratio><method>zstd</method></case></compression>
</yandex>
XML
	cat >"$dir/users.xml" <<XML
<yandex>
    <profiles><default><max_memory_usage>4000000000</max_memory_usage><load_balancing>random</load_balancing></default></profiles>
    <users>
        <default>
            <password>${CH_PASSWORD:-}</password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
XML
	chown -R clickhouse: "$dir"
	chmod 755 "$dir"
	runuser -u clickhouse -- clickhouse-server --config-file="$dir/config.xml" \
		>"$dir/log/stdout.log" 2>&1 &
	CH_PID=$!
	CH_URL="http://127.0.0.1:$CH_HTTP_PORT"
	for _ in $(seq 1 300); do
		if curl -sf "$CH_URL/ping" >/dev/null 2>&1; then
			return 0
		fi
		if ! kill -0 "$CH_PID" 2>/dev/null; then
			echo "clickhouse-server exited; its log:" >&2
			tail -20 "$dir/log/stdout.log" "$dir/log/error.log" >&2 2>/dev/null
			return 1
		fi
		sleep 0.1
	done
	echo "clickhouse-server did not answer on $CH_URL" >&2
	return 1
}

ch_stop() {
	[ -n "${CH_PID:-}" ] || return 0
	# runuser's child is the server; signal the whole process group member.
	pkill -TERM -P "$CH_PID" 2>/dev/null
	kill -TERM "$CH_PID" 2>/dev/null
	for _ in $(seq 1 100); do
		kill -0 "$CH_PID" 2>/dev/null || break
		sleep 0.1
	done
	pkill -KILL -P "$CH_PID" 2>/dev/null
	kill -KILL "$CH_PID" 2>/dev/null
	wait "$CH_PID" 2>/dev/null
	CH_PID=
}

ch_query() {
	curl -sS --fail-with-body "$CH_URL/" --data-binary "$1"
}
