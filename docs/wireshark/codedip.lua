-- CODED IP (random linear network coding at the IP layer), wire format v1.
-- A Wireshark/tshark dissector for linerate's RLNC plugin; the format is
-- docs/rlnc-wire.md. It registers on IPv6 Next Header 253 (RFC 3692).
--
-- Use:  tshark -X lua_script:docs/wireshark/codedip.lua -r capture.pcap
-- or copy it into Wireshark's personal plugins folder.
--
-- Fields (filter names): codedip.nh, codedip.session_id, codedip.session_len,
-- codedip.gen_id, codedip.k, codedip.version, codedip.field,
-- codedip.block_len, codedip.flags, codedip.flags.systematic, codedip.k_used,
-- codedip.vector, codedip.coef, codedip.block, codedip.block.len_prefix
-- (systematic packets: the source block's length prefix), codedip.src_index.

local codedip = Proto("codedip", "CODED IP (RLNC)")

local field_names = { [0] = "GF(2^8) 0x11D", [1] = "GF(2) (reserved)", [2] = "GF(2^4) (reserved)", [3] = "GF(2^16) (reserved)" }

local f = codedip.fields
f.nh          = ProtoField.uint8("codedip.nh", "Next Header", base.DEC)
f.session_id  = ProtoField.uint8("codedip.session_id", "Session ID", base.DEC)
f.session_len = ProtoField.uint16("codedip.session_len", "Session Length", base.DEC)
f.gen_id      = ProtoField.uint16("codedip.gen_id", "Generation ID", base.DEC)
f.k           = ProtoField.uint8("codedip.k", "Generation Size (K)", base.DEC)
f.version     = ProtoField.uint8("codedip.version", "Version", base.DEC, nil, 0xF0)
f.field       = ProtoField.uint8("codedip.field", "Field", base.DEC, field_names, 0x0F)
f.block_len   = ProtoField.uint16("codedip.block_len", "Block Length (N)", base.DEC)
f.flags       = ProtoField.uint8("codedip.flags", "Flags", base.HEX)
f.systematic  = ProtoField.bool("codedip.flags.systematic", "Systematic", 8, nil, 0x80)
f.k_used      = ProtoField.uint8("codedip.k_used", "Blocks Used (k')", base.DEC)
f.vector      = ProtoField.bytes("codedip.vector", "Coding Vector")
f.coef        = ProtoField.uint8("codedip.coef", "Coefficient", base.HEX)
f.src_index   = ProtoField.uint8("codedip.src_index", "Source Block", base.DEC)
f.block       = ProtoField.bytes("codedip.block", "Coded Block")
f.len_prefix  = ProtoField.uint16("codedip.block.len_prefix", "Length Prefix", base.DEC)

local e_short    = ProtoExpert.new("codedip.short", "CODED IP header truncated", expert.group.MALFORMED, expert.severity.ERROR)
local e_version  = ProtoExpert.new("codedip.bad_version", "Unknown CODED IP version", expert.group.MALFORMED, expert.severity.ERROR)
local e_field    = ProtoExpert.new("codedip.bad_field", "Unsupported coding field", expert.group.MALFORMED, expert.severity.WARN)
local e_zero_k   = ProtoExpert.new("codedip.zero_k", "Generation size K is 0", expert.group.MALFORMED, expert.severity.ERROR)
local e_length   = ProtoExpert.new("codedip.bad_length", "12 + K + N does not match the payload", expert.group.MALFORMED, expert.severity.ERROR)
local e_used     = ProtoExpert.new("codedip.bad_k_used", "k' exceeds K, or a coefficient beyond k' is set", expert.group.MALFORMED, expert.severity.ERROR)
local e_zero_vec = ProtoExpert.new("codedip.zero_vector", "All-zero coding vector", expert.group.MALFORMED, expert.severity.ERROR)
local e_sys      = ProtoExpert.new("codedip.bad_systematic", "Systematic packet whose vector is not a unit vector", expert.group.MALFORMED, expert.severity.ERROR)
codedip.experts = { e_short, e_version, e_field, e_zero_k, e_length, e_used, e_zero_vec, e_sys }

function codedip.dissector(tvb, pinfo, tree)
    local len = tvb:len()
    pinfo.cols.protocol = "CODED IP"
    local t = tree:add(codedip, tvb(), "CODED IP (RLNC)")
    if len < 12 then
        t:add_proto_expert_info(e_short)
        return len
    end
    local nh = tvb(0, 1):uint()
    local gen = tvb(4, 2):uint()
    local k = tvb(6, 1):uint()
    local ver = bit.rshift(tvb(7, 1):uint(), 4)
    local fld = bit.band(tvb(7, 1):uint(), 0x0F)
    local n = tvb(8, 2):uint()
    local flags = tvb(10, 1):uint()
    local used = tvb(11, 1):uint()
    local sys = bit.band(flags, 0x80) ~= 0

    t:add(f.nh, tvb(0, 1))
    t:add(f.session_id, tvb(1, 1))
    t:add(f.session_len, tvb(2, 2))
    t:add(f.gen_id, tvb(4, 2))
    local kt = t:add(f.k, tvb(6, 1))
    local vt = t:add(f.version, tvb(7, 1))
    local ft = t:add(f.field, tvb(7, 1))
    t:add(f.block_len, tvb(8, 2))
    local flt = t:add(f.flags, tvb(10, 1))
    flt:add(f.systematic, tvb(10, 1))
    local ut = t:add(f.k_used, tvb(11, 1))
    if used == 0 then
        ut:append_text(" (K)")
    end

    if ver ~= 1 then vt:add_proto_expert_info(e_version) end
    if fld ~= 0 then ft:add_proto_expert_info(e_field) end
    if k == 0 then
        kt:add_proto_expert_info(e_zero_k)
        return len
    end
    if len < 12 + k then
        t:add_proto_expert_info(e_short)
        return len
    end
    if len ~= 12 + k + n then
        t:add_proto_expert_info(e_length)
    end
    local kk = used
    if kk == 0 then kk = k end
    if kk > k then ut:add_proto_expert_info(e_used) end

    local vtree = t:add(f.vector, tvb(12, k))
    local nonzero, ones, idx, beyond = 0, 0, -1, false
    for i = 0, k - 1 do
        local c = tvb(12 + i, 1):uint()
        vtree:add(f.coef, tvb(12 + i, 1)):prepend_text("c" .. i .. ": ")
        if c ~= 0 then
            nonzero = nonzero + 1
            idx = i
            if c == 1 then ones = ones + 1 end
            if i >= kk then beyond = true end
        end
    end
    if nonzero == 0 then vtree:add_proto_expert_info(e_zero_vec) end
    if beyond then vtree:add_proto_expert_info(e_used) end
    if sys then
        if nonzero ~= 1 or ones ~= 1 then
            vtree:add_proto_expert_info(e_sys)
        else
            t:add(f.src_index, idx)
        end
    end

    local blen = len - 12 - k
    if blen > 0 then
        local bt = t:add(f.block, tvb(12 + k, blen))
        if sys and blen >= 2 then
            bt:add(f.len_prefix, tvb(12 + k, 2))
        end
    end

    local what = "coded"
    if sys then what = "systematic block " .. idx end
    pinfo.cols.info = string.format("CODED IP session %d gen %d K=%d N=%d %s", tvb(1, 1):uint(), gen, k, n, what)
    t:append_text(string.format(", Gen %d, K %d, N %d, %s", gen, k, n, what))
    -- The upper layer is coded: no sub-dissector is called.
    return len
end

DissectorTable.get("ip.proto"):add(253, codedip)
