// SPDX-License-Identifier: Apache-2.0
/*
 * vm_devices.c - see vm_devices.h.
 *
 * An entry's functions adapt one device's API (the headers in devices/, which
 * know nothing of struct vm) to the VM; the device code itself does the work.
 */
#include "vmm/vm_devices.h"

#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>

#include "common/guest_net.h"
#include "vmm/kvm_ioctl.h"
#include "vmm/x86/layout.h"

struct vm_device {
	uint32_t state_tag; /* its snapshot section, and its name */
	/* Whether @cfg asks for it; NULL: every machine has it. */
	bool (*wanted)(const struct vm_config *cfg);
	/* Initialises it: 0, or -1 after a message with nothing to release. */
	int (*create)(struct vm *vm, const struct vm_config *cfg);
	/* Connects it to the VM (ports, notifications): 0 or -1 after a
	 * message; destroy releases it either way. */
	int (*attach)(struct vm *vm);
	void (*save)(struct vm *vm, struct state_writer *w);
	int (*restore)(struct vm *vm, const struct state_reader *r);
	/* Devices with a thread: start it (0 or -1), pause and resume it. */
	int (*start)(struct vm *vm);
	void (*pause)(struct vm *vm);
	void (*resume)(struct vm *vm);
	void (*destroy)(struct vm *vm);
};

static void irq_set_level(void *ctx, uint32_t gsi, int level)
{
	struct vm *vm = ctx;
	struct kvm_irq_level irq = { .irq = gsi, .level = level };

	if (ioctl(vm->vm_fd, KVM_IRQ_LINE, &irq) < 0)
		vm_stop(vm, VM_ERROR, "KVM_IRQ_LINE for GSI %u: %s", gsi,
			strerror(errno));
}

static struct irq_line irq_line(struct vm *vm, uint32_t gsi)
{
	return (struct irq_line){ .set_level = irq_set_level,
				  .ctx = vm,
				  .gsi = gsi };
}

void vm_guest_requested_reset(void *ctx)
{
	struct vm *vm = ctx;

	serial_flush(&vm->serial);
	if (vm->console.panicked)
		vm_stop(vm, VM_GUEST_CRASHED, "guest %s",
			vm->console.panic_line);
	else
		vm_stop(vm, VM_GUEST_STOPPED, "guest rebooted");
}

/*
 * The save, restore and destroy entries of a device kept in vm->NAME, whose
 * own API has NAME_save(), NAME_restore() and @destroy.
 */
#define DEFINE_DEVICE_STATE_OPS(name, destroy)                            \
	static void name##_save_vm(struct vm *vm, struct state_writer *w) \
	{                                                                 \
		name##_save(&vm->name, w);                                \
	}                                                                 \
	static int name##_restore_vm(struct vm *vm,                       \
				     const struct state_reader *r)        \
	{                                                                 \
		return name##_restore(&vm->name, r);                      \
	}                                                                 \
	static void name##_destroy_vm(struct vm *vm)                      \
	{                                                                 \
		destroy(&vm->name);                                       \
	}

/*
 * The start, pause and resume entries of a device with a thread, kept in
 * vm->NAME, whose own API has NAME_start(), NAME_pause() and NAME_resume().
 */
#define DEFINE_DEVICE_THREAD_OPS(name)              \
	static int name##_start_vm(struct vm *vm)   \
	{                                           \
		return name##_start(&vm->name);     \
	}                                           \
	static void name##_pause_vm(struct vm *vm)  \
	{                                           \
		name##_pause(&vm->name);            \
	}                                           \
	static void name##_resume_vm(struct vm *vm) \
	{                                           \
		name##_resume(&vm->name);           \
	}

/* The UART at COM1: the guest's console. */

static int serial_create(struct vm *vm, const struct vm_config *cfg)
{
	(void)cfg;
	return serial_init(&vm->serial, irq_line(vm, SERIAL_COM1_IRQ),
			   console_write, &vm->console);
}

static int serial_attach(struct vm *vm)
{
	return bus_register(&vm->pio, "serial", SERIAL_COM1_BASE,
			    SERIAL_PORT_COUNT, &vm->serial, serial_io);
}

DEFINE_DEVICE_STATE_OPS(serial, serial_destroy)

/* The keyboard controller: only its reset line matters (reboot=k). */

static int i8042_create(struct vm *vm, const struct vm_config *cfg)
{
	(void)cfg;
	return i8042_init(&vm->i8042, vm_guest_requested_reset, vm);
}

static int i8042_attach(struct vm *vm)
{
	if (bus_register(&vm->pio, "i8042-data", I8042_DATA_PORT, 1, &vm->i8042,
			 i8042_data_io) < 0)
		return -1;
	return bus_register(&vm->pio, "i8042-command", I8042_COMMAND_PORT, 1,
			    &vm->i8042, i8042_command_io);
}

DEFINE_DEVICE_STATE_OPS(i8042, i8042_destroy)

/* The CMOS clock the guest reads the wall-clock time from at boot. */

static int rtc_create(struct vm *vm, const struct vm_config *cfg)
{
	(void)cfg;
	return rtc_init(&vm->rtc);
}

static int rtc_attach(struct vm *vm)
{
	return bus_register(&vm->pio, "rtc", RTC_BASE, RTC_PORT_COUNT, &vm->rtc,
			    rtc_io);
}

DEFINE_DEVICE_STATE_OPS(rtc, rtc_destroy)

/* The agent channel: virtio-vsock on the first virtio-mmio window. */

static bool vsock_wanted(const struct vm_config *cfg)
{
	return cfg->vsock_path != NULL;
}

static int vsock_create(struct vm *vm, const struct vm_config *cfg)
{
	return vsock_init(&vm->vsock, VSOCK_DEFAULT_GUEST_CID, cfg->vsock_path,
			  cfg->vsock_fd, &vm->mem,
			  irq_line(vm, VIRTIO_MMIO_FIRST_IRQ));
}

/* A virtio-mmio window at @base whose queue notifications wake the device
 * thread's @notify_fd without an exit. */
static int attach_virtio_mmio(struct vm *vm, const char *name, uint64_t base,
			      struct virtio_mmio *transport, int notify_fd)
{
	struct kvm_ioeventfd notify = {
		.addr = base + VIRTIO_MMIO_QUEUE_NOTIFY,
		.len = 4,
		.fd = notify_fd,
	};

	if (KVM_IOCTL(vm->vm_fd, KVM_IOEVENTFD, &notify) < 0)
		return -1;
	return bus_register(&vm->mmio, name, base, VIRTIO_MMIO_SIZE, transport,
			    virtio_mmio_io);
}

static int vsock_attach(struct vm *vm)
{
	return attach_virtio_mmio(vm, "vsock", VIRTIO_MMIO_BASE,
				  vsock_transport(&vm->vsock),
				  vsock_notify_fd(&vm->vsock));
}

DEFINE_DEVICE_THREAD_OPS(vsock)
DEFINE_DEVICE_STATE_OPS(vsock, vsock_stop)

/* The sandbox's network: virtio-net over its TAP on the second window. */

static bool net_wanted(const struct vm_config *cfg)
{
	return cfg->net_tap != NULL;
}

static int net_create(struct vm *vm, const struct vm_config *cfg)
{
	static const uint8_t mac[6] = GUEST_NET_GUEST_MAC;
	int fd = cfg->net_tap_fd >= 0 ? cfg->net_tap_fd
				      : net_tap_open(cfg->net_tap);

	if (fd < 0)
		return -1;
	return net_init(&vm->net, fd, mac, &vm->mem,
			irq_line(vm, VIRTIO_MMIO_NET_IRQ));
}

static int net_attach(struct vm *vm)
{
	return attach_virtio_mmio(vm, "net", VIRTIO_MMIO_NET_BASE,
				  net_transport(&vm->net),
				  net_notify_fd(&vm->net));
}

DEFINE_DEVICE_THREAD_OPS(net)
DEFINE_DEVICE_STATE_OPS(net, net_stop)

/* The order of creation, of the sections in state.bin and of restores. */
static const struct vm_device devices[] = {
	{
		.state_tag = STATE_DEV_SERIAL,
		.create = serial_create,
		.attach = serial_attach,
		.save = serial_save_vm,
		.restore = serial_restore_vm,
		.destroy = serial_destroy_vm,
	},
	{
		.state_tag = STATE_DEV_I8042,
		.create = i8042_create,
		.attach = i8042_attach,
		.save = i8042_save_vm,
		.restore = i8042_restore_vm,
		.destroy = i8042_destroy_vm,
	},
	{
		.state_tag = STATE_DEV_RTC,
		.create = rtc_create,
		.attach = rtc_attach,
		.save = rtc_save_vm,
		.restore = rtc_restore_vm,
		.destroy = rtc_destroy_vm,
	},
	{
		.state_tag = STATE_DEV_VSOCK,
		.wanted = vsock_wanted,
		.create = vsock_create,
		.attach = vsock_attach,
		.save = vsock_save_vm,
		.restore = vsock_restore_vm,
		.start = vsock_start_vm,
		.pause = vsock_pause_vm,
		.resume = vsock_resume_vm,
		.destroy = vsock_destroy_vm,
	},
	{
		.state_tag = STATE_DEV_NET,
		.wanted = net_wanted,
		.create = net_create,
		.attach = net_attach,
		.save = net_save_vm,
		.restore = net_restore_vm,
		.start = net_start_vm,
		.pause = net_pause_vm,
		.resume = net_resume_vm,
		.destroy = net_destroy_vm,
	},
};

#define NR_DEVICES (sizeof(devices) / sizeof(devices[0]))
_Static_assert(NR_DEVICES <= 32, "vm->devices_created has 32 bits");

static bool created(const struct vm *vm, size_t i)
{
	return vm->devices_created & (1u << i);
}

int vm_devices_create(struct vm *vm, const struct vm_config *cfg)
{
	for (size_t i = 0; i < NR_DEVICES; i++) {
		const struct vm_device *d = &devices[i];

		if (d->wanted && !d->wanted(cfg))
			continue;
		if (d->create(vm, cfg) < 0)
			return -1;
		vm->devices_created |= 1u << i;
		if (d->attach(vm) < 0)
			return -1;
	}
	return 0;
}

bool vm_has_device(const struct vm *vm, uint32_t tag)
{
	for (size_t i = 0; i < NR_DEVICES; i++)
		if (devices[i].state_tag == tag)
			return created(vm, i);
	return false;
}

void vm_devices_save(struct vm *vm, struct state_writer *w)
{
	for (size_t i = 0; i < NR_DEVICES; i++)
		if (created(vm, i))
			devices[i].save(vm, w);
}

int vm_devices_restore(struct vm *vm, const struct state_reader *r)
{
	for (size_t i = 0; i < NR_DEVICES; i++)
		if (created(vm, i) && devices[i].restore(vm, r) < 0)
			return -1;
	return 0;
}

int vm_devices_start(struct vm *vm)
{
	int started = 0;

	for (size_t i = 0; i < NR_DEVICES; i++) {
		if (!created(vm, i) || !devices[i].start)
			continue;
		if (devices[i].start(vm) == 0)
			started++;
		else
			vm_stop(vm, VM_ERROR,
				"%s: cannot start the device thread",
				state_tag_name(devices[i].state_tag));
	}
	return started;
}

void vm_devices_pause(struct vm *vm)
{
	for (size_t i = 0; i < NR_DEVICES; i++)
		if (created(vm, i) && devices[i].pause)
			devices[i].pause(vm);
}

void vm_devices_resume(struct vm *vm)
{
	for (size_t i = NR_DEVICES; i-- > 0;)
		if (created(vm, i) && devices[i].resume)
			devices[i].resume(vm);
}

void vm_devices_destroy(struct vm *vm)
{
	for (size_t i = NR_DEVICES; i-- > 0;)
		if (created(vm, i))
			devices[i].destroy(vm);
	vm->devices_created = 0;
}
