// The RDMA slot arena: lease, commit, free and reap slots by key; views into its memory.
#include <memory>
#include <string>

#include "bind_common.hpp"
#include "slot_arena.hpp"

namespace smg::bind {

namespace {

py::object lease_py(const SlotLease& l) {
    if (l.slot < 0) return py::none();
    return int_dict({{"slot", l.slot},
                     {"generation", l.generation},
                     {"frame_offset", l.frame_offset},
                     {"frame_len", l.frame_len},
                     {"payload_offset", l.payload_offset},
                     {"payload_len", l.payload_len}});
}

}  // namespace

void bind_slot_arena(py::module_& m) {
    m.attr("FRAME_HEADER") = kFrameHeader;
    m.attr("FRAME_MAGIC") = kFrameMagic;
    m.attr("FRAME_VERSION") = kFrameVersion;
    m.def(
        "frame_bytes", [](size_t n) { return frame_bytes(n); }, py::arg("payload_len"),
        "Bytes a slot frame with a payload_len-byte payload occupies (header, padded payload, trailer).");
    m.def("key_hash", &key_hash, py::arg("key"), "FNV-1a hash of a lease key, as stored in a frame header.");
    py::class_<SlotArena, std::shared_ptr<SlotArena>>(
        m, "SlotArena",
        "The RDMA slot arena: one pre-faulted buffer of equal slots leased by key,\n"
        "written in place, committed, and freed by key (or reaped after ttl_s).")
        .def(py::init([](int64_t slots, int64_t slot_bytes, double ttl_s) {
                 if (slots < 1 || slot_bytes < 80 || slot_bytes % 64 != 0 || !(ttl_s > 0))
                     throw py::value_error(
                         "SlotArena: need slots >= 1, slot_bytes >= 80 and a "
                         "multiple of 64, ttl_s > 0");
                 py::gil_scoped_release release;  // pre-faulting the arena takes a while
                 return std::make_shared<SlotArena>(size_t(slots), size_t(slot_bytes), ttl_s);
             }),
             py::arg("slots"), py::arg("slot_bytes"), py::arg("ttl_s"),
             "Allocates and pre-faults slots * slot_bytes bytes (slot_bytes a multiple of 64, >= 80,\n"
             "frame included); committed leases older than ttl_s seconds are reaped.")
        .def_property_readonly(
            "address", [](const SlotArena& a) { return reinterpret_cast<uintptr_t>(a.data()); },
            "Base address of the arena (for NIXL registration).")
        .def_property_readonly("size", &SlotArena::size, "Arena bytes: slots * slot_bytes.")
        .def_property_readonly("slots", &SlotArena::slots, "Number of slots.")
        .def_property_readonly("slot_bytes", &SlotArena::slot_bytes, "Bytes per slot, frame included.")
        .def_property_readonly("max_payload", &SlotArena::max_payload, "Largest payload one slot holds.")
        .def_property_readonly("ttl_s", &SlotArena::ttl_s, "Seconds a committed lease lives without a free.")
        .def_property_readonly(
            "in_use", [](const SlotArena& a) { return a.counters().in_use; }, "Slots leased right now.")
        .def(
            "lease",
            [](SlotArena& a, const std::string& key, int64_t n) {
                if (n < 0) throw py::value_error("lease: negative size");
                return lease_py(a.lease(key, size_t(n)));
            },
            py::arg("key"), py::arg("payload_len"),
            "Leases a slot for key and writes its header: a dict (slot, generation, frame_offset, frame_len,\n"
            "payload_offset, payload_len), or None when every slot is taken. ValueError when the payload\n"
            "cannot fit a slot or key already holds a lease.")
        .def("commit", &SlotArena::commit, py::arg("key"),
             "Marks key's payload written, starts its TTL; False if key has no lease.")
        .def("free", &SlotArena::free, py::arg("key"),
             "Releases key's committed slot; False (and counted) for no lease or one still being written.")
        .def("abort", &SlotArena::abort, py::arg("key"),
             "The writer gives up key's lease, committed or not; False if key holds no lease.")
        .def("reap", &SlotArena::reap, "Releases committed leases older than the TTL; returns how many.")
        .def("reap_after", &SlotArena::reap_after, py::arg("seconds"),
             "Reaps as if seconds had passed (tests the TTL path without sleeping); returns how many.")
        .def(
            "view",
            [](py::object self, int64_t offset, int64_t n) {
                auto& a = self.cast<SlotArena&>();
                if (offset < 0 || n < 0 || size_t(offset) > a.size() || size_t(n) > a.size() - size_t(offset))
                    throw py::value_error("view: range outside the arena");
                return py::array_t<uint8_t>({n}, {1}, a.data() + offset, self);
            },
            py::arg("offset"), py::arg("nbytes"),
            "A writable uint8 view of nbytes of the arena from offset; it keeps the arena alive.")
        .def(
            "copy_in",
            [](SlotArena& a, const std::string& key, const py::array& arr) {
                if (!(arr.flags() & py::array::c_style))
                    throw py::value_error("copy_in: expected a C-contiguous array");
                const size_t n = size_t(arr.nbytes());
                return lease_py([&] {
                    py::gil_scoped_release release;
                    return a.copy_in(key, arr.data(), n);
                }());
            },
            py::arg("key"), py::arg("src"),
            "Leases a slot for key, copies the C-contiguous array src in (thread pool, GIL released)\n"
            "and commits; the lease dict, or None when full.")
        .def(
            "counters",
            [](const SlotArena& a) {
                const ArenaCounters c = a.counters();
                return int_dict({{"leased", c.leased},
                                 {"committed", c.committed},
                                 {"freed", c.freed},
                                 {"reaped", c.reaped},
                                 {"full", c.full},
                                 {"too_large", c.too_large},
                                 {"unknown_free", c.unknown_free},
                                 {"refused_free", c.refused_free},
                                 {"in_use", c.in_use}});
            },
            "Lifetime counters: leased, committed, freed, reaped, full, too_large, unknown_free,\n"
            "refused_free, and in_use (slots leased now).");
}

}  // namespace smg::bind
