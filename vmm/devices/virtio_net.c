// SPDX-License-Identifier: Apache-2.0
/*
 * virtio_net.c - virtio-net device over a TAP; see virtio_net.h.
 *
 * One pass of the device thread: apply a reset or an activation the vCPUs
 * asked for, send the guest's TX frames to the TAP, deliver frames from
 * the TAP (the one held back first) into RX, and put the TAP in or out of
 * the epoll set depending on whether another frame could be delivered.
 */
#include "vmm/devices/virtio_net.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/if_tun.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "vmm/devices/device_state.h"
#include "common/log.h"

#define TAG_TAP (DEVICE_THREAD_TAG_KICK + 1)

#define OFFERED_FEATURES                                                       \
	((1ULL << VIRTIO_NET_F_CSUM) | (1ULL << VIRTIO_NET_F_GUEST_CSUM) |     \
	 (1ULL << VIRTIO_NET_F_MAC) | (1ULL << VIRTIO_NET_F_GUEST_TSO4) |      \
	 (1ULL << VIRTIO_NET_F_HOST_TSO4) | (1ULL << VIRTIO_NET_F_MRG_RXBUF) | \
	 (1ULL << VIRTIO_NET_F_STATUS))

static bool has(uint64_t features, unsigned int bit)
{
	return features & (1ULL << bit);
}

static void count(_Atomic uint64_t *counter)
{
	atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

/* --- The TAP ------------------------------------------------------------ */

int net_tap_open(const char *name)
{
	struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR };
	int hdr_size = NET_HDR_SIZE;
	int fd;

	if (strlen(name) >= IFNAMSIZ) {
		log_error("TAP %s: name longer than %d", name, IFNAMSIZ - 1);
		return -1;
	}
	/* TUNSETIFF would create a missing TAP, which nobody would route
	 * or police: only an existing one is used. */
	if (!if_nametoindex(name)) {
		log_error("TAP %s: no such interface in this network "
			  "namespace",
			  name);
		return -1;
	}
	fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		log_error("TAP %s: /dev/net/tun: %s", name, strerror(errno));
		return -1;
	}
	strcpy(ifr.ifr_name, name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		log_error("TAP %s: TUNSETIFF: %s", name, strerror(errno));
		goto fail;
	}
	if (ioctl(fd, TUNSETVNETHDRSZ, &hdr_size) < 0) {
		log_error("TAP %s: TUNSETVNETHDRSZ %d: %s", name, hdr_size,
			  strerror(errno));
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return -1;
}

/*
 * What the TAP may hand us: the offloads the driver acked for its RX side
 * (TSO needs checksum offload in TUN's terms too).  A backend that is not
 * a TAP takes none.
 */
static void set_offloads(struct net_dev *net, uint64_t features)
{
	unsigned int offloads = 0;

	if (!net->tap_is_tap)
		return;
	if (has(features, VIRTIO_NET_F_GUEST_CSUM)) {
		offloads |= TUN_F_CSUM;
		if (has(features, VIRTIO_NET_F_GUEST_TSO4))
			offloads |= TUN_F_TSO4;
	}
	if (ioctl(net->tap_fd, TUNSETOFFLOAD, offloads) < 0)
		log_limited(LOG_LEVEL_WARNING,
			    "net: TUNSETOFFLOAD %#x: %s; frames may be lost",
			    offloads, strerror(errno));
}

static void watch_tap(struct net_dev *net, bool want)
{
	if (want == net->tap_watched)
		return;
	if (device_thread_watch(&net->thread, EPOLL_CTL_MOD, net->tap_fd,
				want ? EPOLLIN : 0, TAG_TAP) == 0)
		net->tap_watched = want;
}

/* --- TX: frames from the guest ------------------------------------------ */

/*
 * A TX frame's head: the virtio header, Ethernet, IPv4 with options and a
 * TCP header, all that tx_head_valid() reads.  The device writes it from
 * its own copy, so a guest rewriting its buffer meanwhile (another vCPU)
 * changes only bytes nobody judged.
 */
#define NET_TX_HEAD (NET_HDR_SIZE + NET_ETH_HLEN + 60 + 20)

/*
 * Checksum offload: the kernel writes the sum at csum_start + csum_offset
 * when the frame leaves the host, after the policy judged it, so the
 * header may name only the checksum field of the frame's own TCP or UDP
 * header.  Anywhere else the guest would choose the port or address the
 * frame travels with.  @frame: @len bytes from the Ethernet header.
 */
static bool tx_checksum_valid(const struct virtio_net_hdr_v1 *hdr,
			      const uint8_t *frame, uint32_t len)
{
	const uint8_t *ip = frame + NET_ETH_HLEN;
	uint32_t l4, field;

	if (len < NET_ETH_HLEN + 20 || frame[12] != 0x08 || frame[13] != 0 ||
	    ip[0] >> 4 != 4 || (ip[0] & 0xf) < 5)
		return false;
	l4 = NET_ETH_HLEN + (ip[0] & 0xfu) * 4;
	if (ip[9] == IPPROTO_TCP)
		field = 16; /* struct tcphdr's check */
	else if (ip[9] == IPPROTO_UDP &&
		 hdr->gso_type == VIRTIO_NET_HDR_GSO_NONE)
		field = 6; /* struct udphdr's check */
	else
		return false;
	return le16toh(hdr->csum_start) == l4 &&
	       le16toh(hdr->csum_offset) == field;
}

/* Whether the guest's header asks only for what it negotiated, and its
 * checksum offload only for the L4 checksum.  @frame: @len bytes from the
 * Ethernet header. */
static bool tx_head_valid(const struct virtio_net_hdr_v1 *hdr,
			  const uint8_t *frame, uint32_t len, uint64_t features)
{
	if (hdr->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) {
		if (!has(features, VIRTIO_NET_F_CSUM) ||
		    !tx_checksum_valid(hdr, frame, len))
			return false;
	}
	if (hdr->flags & ~VIRTIO_NET_HDR_F_NEEDS_CSUM)
		return false;
	switch (hdr->gso_type) {
	case VIRTIO_NET_HDR_GSO_NONE:
		return true;
	case VIRTIO_NET_HDR_GSO_TCPV4:
		return has(features, VIRTIO_NET_F_HOST_TSO4) &&
		       (hdr->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM);
	default:
		return false;
	}
}

/* Copies the first @len bytes of @iov (@cnt entries) to @dst and makes
 * @rest the iovec past them: its count. */
static int split_head(const struct iovec *iov, int cnt, uint8_t *dst,
		      size_t len, struct iovec *rest)
{
	size_t got = 0;
	int n = 0;

	for (int i = 0; i < cnt; i++) {
		size_t take =
			iov[i].iov_len < len - got ? iov[i].iov_len : len - got;

		memcpy(dst + got, iov[i].iov_base, take);
		got += take;
		if (take < iov[i].iov_len)
			rest[n++] = (struct iovec){
				.iov_base = (uint8_t *)iov[i].iov_base + take,
				.iov_len = iov[i].iov_len - take,
			};
	}
	return n;
}

static void tx_chain(struct net_dev *net, const struct virtq_chain *chain,
		     uint64_t features)
{
	struct iovec iov[VIRTQ_MAX_SIZE], out[VIRTQ_MAX_SIZE + 1];
	uint8_t head[NET_TX_HEAD];
	struct virtio_net_hdr_v1 hdr;
	uint64_t total;
	int cnt = virtq_chain_iov(chain, false, iov, &total);
	size_t head_len;

	if (total < NET_HDR_SIZE + NET_ETH_HLEN || total > NET_FRAME_MAX) {
		count(&net->tx_dropped);
		return;
	}
	head_len = total < sizeof(head) ? total : sizeof(head);
	cnt = split_head(iov, cnt, head, head_len, out + 1);
	memcpy(&hdr, head, NET_HDR_SIZE);
	if (!tx_head_valid(&hdr, head + NET_HDR_SIZE,
			   (uint32_t)(head_len - NET_HDR_SIZE), features)) {
		count(&net->tx_dropped);
		return;
	}
	out[0] = (struct iovec){ .iov_base = head, .iov_len = head_len };
	/* The TAP takes a frame per write and never blocks; a full
	 * backend (a test's socket) drops it, as a full link would. */
	if (writev(net->tap_fd, out, cnt + 1) < 0) {
		if (errno != EAGAIN)
			log_limited(LOG_LEVEL_WARNING,
				    "net: TAP write of %llu bytes: %s",
				    (unsigned long long)total, strerror(errno));
		count(&net->tx_dropped);
		return;
	}
	count(&net->tx_frames);
}

static void process_tx(struct net_dev *net, uint64_t features)
{
	struct virtq_chain chain;
	bool used = false;
	int n;

	for (n = 0; n < NET_QUEUE_SIZE; n++) {
		if (virtio_mmio_pop(&net->transport, NET_QUEUE_TX, &chain) <= 0)
			break;
		tx_chain(net, &chain, features);
		virtio_mmio_push(&net->transport, NET_QUEUE_TX, chain.head, 0);
		used = true;
	}
	if (n == NET_QUEUE_SIZE)
		net->more_work = true;
	if (used)
		virtio_mmio_signal_used(&net->transport, NET_QUEUE_TX);
}

/* --- RX: frames to the guest -------------------------------------------- */

/* Copies up to @len bytes of @src into @chain's writable buffers. */
static uint32_t copy_to_chain(const struct virtq_chain *chain,
			      const uint8_t *src, uint32_t len)
{
	uint32_t done = 0;

	for (uint16_t i = 0; i < chain->count && done < len; i++) {
		const struct virtq_segment *s = &chain->segments[i];
		uint32_t n;

		if (!s->writable)
			continue;
		n = s->len < len - done ? s->len : len - done;
		memcpy(s->addr, src + done, n);
		done += n;
	}
	return done;
}

/*
 * Makes the held frame's header fit the driver: flags and GSO only as
 * negotiated.  Returns false for a frame it cannot take (the TAP's offload
 * setting should prevent those).
 */
static bool rx_header_fits(struct virtio_net_hdr_v1 *hdr, uint64_t features)
{
	if (!has(features, VIRTIO_NET_F_GUEST_CSUM)) {
		if (hdr->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM)
			return false;
		hdr->flags = 0; /* the spec's "MUST set flags to zero" */
	}
	if (hdr->gso_type == VIRTIO_NET_HDR_GSO_NONE)
		return true;
	return hdr->gso_type == VIRTIO_NET_HDR_GSO_TCPV4 &&
	       has(features, VIRTIO_NET_F_GUEST_TSO4);
}

enum rx_result { RX_DONE, RX_NO_BUFFERS };

/* Hands the popped chains back with what was written, or 0 for a dropped
 * frame (the guest then sees a runt and reposts the buffers). */
static void rx_push(struct net_dev *net, const uint16_t *heads,
		    const uint32_t *lens, int n, bool dropped)
{
	for (int i = 0; i < n; i++)
		virtio_mmio_push(&net->transport, NET_QUEUE_RX, heads[i],
				 dropped ? 0 : lens[i]);
}

/*
 * Delivers the held frame into as many RX buffers as it takes (one without
 * MRG_RXBUF).  RX_NO_BUFFERS: the guest has too few posted, the frame is
 * still held and the buffers taken for it are given back.
 */
static enum rx_result rx_deliver(struct net_dev *net, uint64_t features)
{
	struct virtio_net_hdr_v1 *hdr = (void *)net->rx_frame;
	int max_chains =
		has(features, VIRTIO_NET_F_MRG_RXBUF) ? NET_RX_MAX_CHAINS : 1;
	uint16_t heads[NET_RX_MAX_CHAINS];
	uint32_t lens[NET_RX_MAX_CHAINS];
	struct virtq_chain chain, *c;
	uint32_t off = 0;
	int n = 0, ret;

	if (!rx_header_fits(hdr, features)) {
		count(&net->rx_dropped);
		return RX_DONE;
	}
	while (off < net->rx_len) {
		if (n == max_chains) {
			/* Buffers too small for this frame: leave them. */
			virtio_mmio_unpop(&net->transport, NET_QUEUE_RX, n);
			count(&net->rx_dropped);
			return RX_DONE;
		}
		c = n == 0 ? &net->rx_first : &chain;
		ret = virtio_mmio_pop(&net->transport, NET_QUEUE_RX, c);
		if (ret < 0) { /* the transport wants a reset now */
			count(&net->rx_dropped);
			return RX_DONE;
		}
		if (ret == 0) {
			virtio_mmio_unpop(&net->transport, NET_QUEUE_RX, n);
			return RX_NO_BUFFERS;
		}
		heads[n] = c->head;
		lens[n] = copy_to_chain(c, net->rx_frame + off,
					net->rx_len - off);
		off += lens[n++];
		if (lens[n - 1] == 0 || (n == 1 && lens[0] < NET_HDR_SIZE)) {
			/* A buffer with no room, or none for the header. */
			rx_push(net, heads, lens, n, true);
			count(&net->rx_dropped);
			return RX_DONE;
		}
	}
	hdr->num_buffers = (uint16_t)n;
	copy_to_chain(&net->rx_first, net->rx_frame, NET_HDR_SIZE);
	rx_push(net, heads, lens, n, false);
	count(&net->rx_frames);
	return RX_DONE;
}

/* Reads the next frame from the TAP; false when there is none. */
static bool rx_read(struct net_dev *net)
{
	for (;;) {
		ssize_t n = read(net->tap_fd, net->rx_frame, NET_FRAME_MAX);

		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				log_limited(LOG_LEVEL_WARNING,
					    "net: TAP read: %s",
					    strerror(errno));
			return false;
		}
		if (n >= NET_HDR_SIZE + NET_ETH_HLEN) {
			net->rx_len = (uint32_t)n;
			return true;
		}
		count(&net->rx_dropped); /* a runt: read the next one */
	}
}

static void fill_rx(struct net_dev *net, uint64_t features)
{
	bool used = false;

	for (int i = 0; i < NET_RX_BUDGET; i++) {
		if (!net->rx_len && !rx_read(net))
			break;
		if (rx_deliver(net, features) == RX_NO_BUFFERS)
			break;
		net->rx_len = 0;
		used = true;
		if (i == NET_RX_BUDGET - 1)
			net->more_work = true;
	}
	if (used)
		virtio_mmio_signal_used(&net->transport, NET_QUEUE_RX);
}

/* --- Device thread ------------------------------------------------------ */

static void work(void *device, const struct epoll_event *events, int n)
{
	struct net_dev *net = device;
	uint64_t features;

	(void)events; /* the TAP's readiness: fill_rx reads until EAGAIN */
	(void)n;
	net->more_work = false;
	if (atomic_exchange(&net->reset_requested, false)) {
		net->rx_len = 0; /* the new driver never asked for it */
		set_offloads(net, 0);
	}
	features = atomic_load(&net->features);
	if (atomic_exchange(&net->activate_requested, false))
		set_offloads(net, features);
	if (atomic_load(&net->live)) {
		process_tx(net, features);
		fill_rx(net, features);
	}
	/* Read the TAP only when a frame could go somewhere. */
	watch_tap(net, atomic_load(&net->live) && !net->rx_len);
}

static int next_timeout(void *device)
{
	return ((struct net_dev *)device)->more_work ? 0 : -1;
}

int net_run_once(struct net_dev *net, int timeout_ms)
{
	return device_thread_run_once(&net->thread, timeout_ms);
}

/* --- Transport callbacks (vCPU threads) --------------------------------- */

static void net_config_access(void *backend, uint64_t offset, uint8_t *data,
			      uint32_t len, bool is_write)
{
	struct net_dev *net = backend;
	struct virtio_net_config config = {
		.status = net->state.status,
		.max_virtqueue_pairs = 1,
		.mtu = 1500,
	};

	if (is_write)
		return; /* the MAC is the device's: no CTRL_MAC_ADDR */
	memcpy(config.mac, net->state.mac, sizeof(config.mac));
	memset(data, 0, len);
	if (offset < sizeof(config))
		memcpy(data, (uint8_t *)&config + offset,
		       len < sizeof(config) - offset ? len
						     : sizeof(config) - offset);
}

static void net_queue_notify(void *backend, uint16_t queue)
{
	struct net_dev *net = backend;

	(void)queue; /* each pass looks at both */
	device_thread_kick(&net->thread);
}

static void net_activate(void *backend, uint64_t features)
{
	struct net_dev *net = backend;

	atomic_store(&net->features, features);
	atomic_store(&net->activate_requested, true);
	atomic_store(&net->live, true);
	device_thread_kick(&net->thread);
}

static void net_reset(void *backend)
{
	struct net_dev *net = backend;

	atomic_store(&net->live, false);
	atomic_store(&net->features, 0);
	atomic_store(&net->reset_requested, true);
	device_thread_kick(&net->thread);
}

static const struct virtio_backend_ops net_ops = {
	.device_id = VIRTIO_ID_NET,
	.features = OFFERED_FEATURES,
	.num_queues = NET_NUM_QUEUES,
	.queue_size_max = NET_QUEUE_SIZE,
	.config_access = net_config_access,
	.queue_notify = net_queue_notify,
	.activate = net_activate,
	.reset = net_reset,
};

/* --- Setup -------------------------------------------------------------- */

static bool mac_valid(const uint8_t mac[6])
{
	static const uint8_t zero[6];

	/* Unicast, and not all zeros. */
	return !(mac[0] & 1) && memcmp(mac, zero, sizeof(zero));
}

int net_init(struct net_dev *net, int tap_fd, const uint8_t mac[6],
	     const struct guest_memory *mem, struct irq_line irq)
{
	memset(net, 0, sizeof(*net));
	net->tap_fd = tap_fd;
	if (!mac_valid(mac)) {
		log_error("net: MAC %02x:%02x:%02x:%02x:%02x:%02x is not a "
			  "unicast address",
			  mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
		goto fail;
	}
	memcpy(net->state.mac, mac, sizeof(net->state.mac));
	net->state.status = VIRTIO_NET_S_LINK_UP;
	atomic_init(&net->features, 0);
	atomic_init(&net->live, false);
	atomic_init(&net->reset_requested, false);
	atomic_init(&net->activate_requested, false);
	net->rx_frame = malloc(NET_FRAME_MAX);
	if (!net->rx_frame) {
		log_error("net: out of memory");
		goto fail;
	}
	if (fcntl(tap_fd, F_SETFL, O_NONBLOCK) < 0) {
		log_error("net: TAP fd %d: %s", tap_fd, strerror(errno));
		goto fail;
	}
	/* The driver's acks come later; until then the TAP hands out no
	 * offloaded frame.  ENOTTY/EBADFD: not a TAP (a test's socket). */
	net->tap_is_tap = ioctl(tap_fd, TUNSETOFFLOAD, 0) == 0;
	if (device_thread_init(&net->thread, "net", VMM_THREAD_NET, net, work,
			       next_timeout) < 0)
		goto fail;
	/* In the set from the start, with no events until the driver is
	 * live: watch_tap() only ever modifies. */
	if (device_thread_watch(&net->thread, EPOLL_CTL_ADD, tap_fd, 0,
				TAG_TAP) < 0 ||
	    virtio_mmio_init(&net->transport, "net", &net_ops, net, mem, irq)) {
		device_thread_destroy(&net->thread);
		goto fail;
	}
	return 0;
fail:
	free(net->rx_frame);
	net->rx_frame = NULL;
	close(tap_fd);
	net->tap_fd = -1;
	return -1;
}

int net_start(struct net_dev *net)
{
	return device_thread_start(&net->thread);
}

void net_stop(struct net_dev *net)
{
	device_thread_destroy(&net->thread);
	virtio_mmio_destroy(&net->transport);
	if (net->tap_fd >= 0)
		close(net->tap_fd);
	net->tap_fd = -1;
	free(net->rx_frame);
	net->rx_frame = NULL;
}

void net_pause(struct net_dev *net)
{
	device_thread_pause(&net->thread);
}

void net_resume(struct net_dev *net)
{
	device_thread_resume(&net->thread);
}

void net_save(struct net_dev *net, struct state_writer *w)
{
	virtio_mmio_save(&net->transport, NET_TRANSPORT_INSTANCE, w);
	state_put(w, STATE_DEV_NET, 0, &net->state, sizeof(net->state));
}

int net_restore(struct net_dev *net, const struct state_reader *r)
{
	const struct virtio_mmio_state *t = &net->transport.state;
	struct net_state s;
	bool live;

	if (state_get(r, STATE_DEV_NET, 0, &s, sizeof(s)))
		return -1;
	if (!mac_valid(s.mac)) {
		log_error("snapshot state: net mac is not a unicast address");
		return -1;
	}
	if (!state_bits_valid(s.status, VIRTIO_NET_S_LINK_UP, "net", "status"))
		return -1;
	if (virtio_mmio_restore(&net->transport, NET_TRANSPORT_INSTANCE, r))
		return -1;
	net->state = s;
	live = (t->status & VIRTIO_STATUS_DRIVER_OK) &&
	       !(t->status & VIRTIO_STATUS_DEVICE_NEEDS_RESET);
	atomic_store(&net->features, live ? t->driver_features : 0);
	atomic_store(&net->live, live);
	/* This clone's TAP is new: tell it what the driver takes. */
	set_offloads(net, atomic_load(&net->features));
	/* The guest's notifications went to the old device. */
	device_thread_kick(&net->thread);
	return 0;
}
