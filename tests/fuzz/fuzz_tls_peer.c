/*
 * libFuzzer harness for proxy_tls_peer_from_cert: a client certificate is
 * the network's bytes (DER, as in a TLS Certificate message). No input may
 * crash it, and what it returns keeps its promises: a subject without NUL
 * within its cap, a CN of at most 64 bytes without control characters.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/x509.h>

#include "proxy/tls.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const unsigned char *p = data;
	struct proxy_tls_peer peer;
	X509 *cert = d2i_X509(NULL, &p, (long)size);

	if (cert == NULL)
		return 0;
	if (proxy_tls_peer_from_cert(cert, &peer) == 0) {
		size_t n = strnlen(peer.subject, sizeof(peer.subject));

		if (n > POLICY_TLS_SUBJECT_MAX)
			abort();
		n = strnlen(peer.cn, sizeof(peer.cn));
		if (n > POLICY_TLS_CN_MAX)
			abort();
		for (size_t i = 0; i < n; i++) {
			if ((unsigned char)peer.cn[i] < 0x20 || peer.cn[i] == 0x7f)
				abort();
		}
	}
	X509_free(cert);
	return 0;
}
