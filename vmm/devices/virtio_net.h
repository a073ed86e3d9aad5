/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio_net.h - virtio-net device (virtio ID 1) on the virtio-mmio
 * transport, with a TAP device as its backend: the sandbox's network
 * (common/guest_net.h, DESIGN.md "Network per sandbox").
 *
 * Backend: a TAP opened with IFF_TAP | IFF_NO_PI | IFF_VNET_HDR and a
 * vnet header size of 12, the size of virtio 1.x's struct
 * virtio_net_hdr_v1 (num_buffers included).  Frames therefore pass between
 * the rings and the TAP unchanged, header and all: TX is one writev() of a
 * chain's readable buffers, RX one read() into a staging buffer and a copy
 * into the guest's buffers with num_buffers filled in.  The TAP lives in
 * the sandbox's network namespace and is opened there by name before the
 * VMM's jail hides /dev (net_tap_open()); the device only sees the fd, so
 * the unit tests give it one end of a socket pair instead.
 *
 * Features: VERSION_1 (the transport's), MAC (GUEST_NET_GUEST_MAC, fixed:
 * every clone of a snapshot is the same guest), STATUS (link always up),
 * MRG_RXBUF (a frame may span several RX buffers, so the guest posts small
 * ones instead of 64 KiB per buffer), and the offloads: CSUM and HOST_TSO4
 * (the guest sends partial checksums and TCP segments up to 64 KiB, which
 * the TAP's kernel side finishes) and GUEST_CSUM and GUEST_TSO4 (the TAP
 * may hand us such frames).  The latter two are what TUNSETOFFLOAD tells
 * the TAP, set from what the driver acked once it is live: a driver that
 * did not ack them never gets a frame it cannot take.  No control queue,
 * no multiqueue.
 *
 * Backpressure: a frame read from the TAP stays in the staging buffer until
 * the guest has posted buffers enough for it (chains popped for it are
 * given back with virtio_mmio_unpop() when they run out); meanwhile, and
 * while the driver is not live, the TAP is out of the epoll set, so frames
 * queue in the kernel (which drops beyond the TAP's queue length) and the
 * thread sleeps until the guest notifies.
 *
 * Untrusted guest: malformed rings are the transport's (DEVICE_NEEDS_RESET);
 * here, a TX chain shorter than a header and an Ethernet header, longer
 * than NET_FRAME_MAX, or with offload flags the driver did not negotiate
 * is dropped (counted in tx_dropped); an RX chain with no room for the
 * header or a frame needing more than NET_RX_MAX_CHAINS buffers drops that
 * frame (rx_dropped).  Each pass handles at most a queue's worth of TX
 * chains and NET_RX_BUDGET frames, so neither direction starves the other.
 *
 * Threading: one thread (device_thread.h, seccomp role VMM_THREAD_NET)
 * waits on the TAP and the kick eventfd, which the VMM registers as a KVM
 * ioeventfd on this transport's QueueNotify; every pass looks at both
 * queues.  Transport callbacks (vCPU threads) only set atomics and kick.
 *
 * Snapshots: the thread pauses between passes, holding no chain; the
 * transport (instance NET_TRANSPORT_INSTANCE) and struct net_state are
 * saved.  A frame in the staging buffer is not: a network may lose a
 * frame.  A restore gets the new clone's TAP (same name, its own
 * namespace), sets its offloads from the restored features and looks at
 * the queues once started.
 */
#ifndef THAW_VMM_DEVICES_VIRTIO_NET_H
#define THAW_VMM_DEVICES_VIRTIO_NET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "vmm/devices/device_thread.h"
#include "vmm/devices/virtio_mmio.h"
#include "vmm/irq.h"
#include "vmm/memory.h"
#include "snapshot/state.h"

#define VIRTIO_ID_NET 1

/* Feature bits, virtio 1.2 5.1.3. */
#define VIRTIO_NET_F_CSUM 0
#define VIRTIO_NET_F_GUEST_CSUM 1
#define VIRTIO_NET_F_MAC 5
#define VIRTIO_NET_F_GUEST_TSO4 7
#define VIRTIO_NET_F_HOST_TSO4 11
#define VIRTIO_NET_F_MRG_RXBUF 15
#define VIRTIO_NET_F_STATUS 16

#define VIRTIO_NET_S_LINK_UP 1

#define VIRTIO_NET_HDR_F_NEEDS_CSUM 1
#define VIRTIO_NET_HDR_F_DATA_VALID 2
#define VIRTIO_NET_HDR_GSO_NONE 0
#define VIRTIO_NET_HDR_GSO_TCPV4 1

#define NET_QUEUE_RX 0
#define NET_QUEUE_TX 1
#define NET_NUM_QUEUES 2
#define NET_QUEUE_SIZE 256

/* The second virtio-mmio window is the network's (vsock has the first). */
#define NET_TRANSPORT_INSTANCE 1

/* Frame header, virtio 1.2 5.1.6; little endian like the host. */
struct virtio_net_hdr_v1 {
	uint8_t flags;
	uint8_t gso_type;
	uint16_t hdr_len;
	uint16_t gso_size;
	uint16_t csum_start;
	uint16_t csum_offset;
	uint16_t num_buffers;
} __attribute__((packed));

_Static_assert(sizeof(struct virtio_net_hdr_v1) == 12,
	       "virtio_net_hdr_v1 is 12 bytes on the wire");

#define NET_HDR_SIZE ((uint32_t)sizeof(struct virtio_net_hdr_v1))
#define NET_ETH_HLEN 14
/* The largest frame either way: a 64 KiB TSO packet behind an Ethernet
 * header with a VLAN tag, and the virtio header. */
#define NET_FRAME_MAX (NET_HDR_SIZE + NET_ETH_HLEN + 4 + 65535)
/* The most RX buffers one frame may take: Linux's mergeable buffers are
 * at least 1518 bytes, so a largest frame needs 44. */
#define NET_RX_MAX_CHAINS 64
/* Frames delivered per pass before TX gets its turn again. */
#define NET_RX_BUDGET 64

/* Device configuration space, virtio 1.2 5.1.4. */
struct virtio_net_config {
	uint8_t mac[6];
	uint16_t status;
	uint16_t max_virtqueue_pairs;
	uint16_t mtu;
} __attribute__((packed));

/* Guest-visible device state beyond the transport's. */
struct net_state {
	uint8_t mac[6];
	uint16_t status;
};

struct net_dev {
	struct virtio_mmio transport; /* register this on the MMIO bus */
	struct net_state state;
	struct device_thread thread;
	int tap_fd;
	bool tap_is_tap; /* takes TUNSETOFFLOAD (a test's socket does not) */
	bool tap_watched;
	bool more_work; /* a budget ran out: don't sleep */

	/* The thread's: a frame read from the TAP, not delivered yet. */
	uint8_t *rx_frame;
	uint32_t rx_len;
	struct virtq_chain rx_first; /* the frame's first buffer */

	/* Set from vCPU threads (transport callbacks). */
	_Atomic uint64_t features; /* the driver's, once live */
	atomic_bool live;
	atomic_bool reset_requested;
	atomic_bool activate_requested;

	_Atomic uint64_t tx_frames, tx_dropped, rx_frames, rx_dropped;
};

/*
 * Opens /dev/net/tun and attaches to the existing TAP @name of the calling
 * thread's network namespace with a 12-byte vnet header, non-blocking.
 * Returns the fd, or -1 after a message naming the TAP.
 */
int net_tap_open(const char *name);

/*
 * Prepares the device over @tap_fd (which it owns from now on, also on
 * failure) with @mac, on @mem and @irq.  Returns 0, or -1 after a message.
 * After success call net_stop() once, whether or not the thread started.
 */
int net_init(struct net_dev *net, int tap_fd, const uint8_t mac[6],
	     const struct guest_memory *mem, struct irq_line irq);

int net_start(struct net_dev *net);
/* Joins the thread and closes the TAP; vCPUs no longer access the device. */
void net_stop(struct net_dev *net);
void net_pause(struct net_dev *net);
void net_resume(struct net_dev *net);
/* One pass on the calling thread instead of net_start() (tests, fuzzing). */
int net_run_once(struct net_dev *net, int timeout_ms);

/* Adds transport instance NET_TRANSPORT_INSTANCE and struct net_state; the
 * device must be paused or not started. */
void net_save(struct net_dev *net, struct state_writer *w);

/*
 * Between net_init() and net_start(): installs the saved transport and
 * state, and sets the TAP's offloads for the restored driver.  Returns 0,
 * or -1 after a message with the device untouched.
 */
int net_restore(struct net_dev *net, const struct state_reader *r);

static inline struct virtio_mmio *net_transport(struct net_dev *net)
{
	return &net->transport;
}

/* The eventfd to register as an ioeventfd on QueueNotify (vsock.h). */
static inline int net_notify_fd(const struct net_dev *net)
{
	return net->thread.kick_fd;
}

#endif
