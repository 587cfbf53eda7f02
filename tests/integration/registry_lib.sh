# Debian's docker-registry on loopback for the pull tests (sourced after
# lib.sh): a CA and a certificate for 127.0.0.1 made with openssl, and
# registries started on free ports with that certificate, plain HTTP, or
# bearer-token auth.

# make_ca DIR: DIR/ca.crt, and DIR/server.{crt,key} for 127.0.0.1 (and
# localhost) signed by it.
make_ca() {
	local d=$1
	mkdir -p "$d"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
		-subj /CN=tollgate-test-registry-ca -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
		-keyout "$d/server.key" -out "$d/server.csr" 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$d/ext"
	openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
		-days 1 -extfile "$d/ext" -out "$d/server.crt" 2>/dev/null
}

# start_registry NAME PORT STORAGE MODE [TOKEN_REALM TOKEN_CERT]: MODE tls,
# plain or token (tls with bearer auth). Its log is $TEST_TMP/NAME.log.
start_registry() {
	local name=$1 port=$2 storage=$3 mode=$4 conf=$TEST_TMP/$1.yml
	{
		printf 'version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: false\n'
		printf 'storage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\n' "$storage"
		printf 'http:\n  addr: 127.0.0.1:%s\n  secret: tollgate-test\n' "$port"
		if [[ $mode != plain ]]; then
			printf '  tls:\n    certificate: %s\n    key: %s\n' "$TEST_TMP/ca/server.crt" "$TEST_TMP/ca/server.key"
		fi
		if [[ $mode == token ]]; then
			printf 'auth:\n  token:\n    realm: %s\n    service: tollgate-test-registry\n' "$5"
			printf '    issuer: tollgate-test-issuer\n    rootcertbundle: %s\n' "$6"
		fi
	} >"$conf"
	docker-registry serve "$conf" >"$TEST_TMP/$name.log" 2>&1 &
	local pid=$!
	defer "kill $pid 2>/dev/null; wait $pid 2>/dev/null"
	local scheme=https
	[[ $mode == plain ]] && scheme=http
	wait_for 30 curl -s -o /dev/null --cacert "$TEST_TMP/ca/ca.crt" "$scheme://127.0.0.1:$port/v2/" || {
		cat "$TEST_TMP/$name.log" >&2
		skip "docker-registry did not start on 127.0.0.1:$port"
	}
}

# blob_gets NAME: how many blob downloads the registry NAME served.
blob_gets() {
	grep -c '"GET /v2/[^"]*/blobs/sha256:' "$TEST_TMP/$1.log" || true
}
