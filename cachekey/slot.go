package cachekey

// Slots is the number of Redis Cluster hash slots.
const Slots = 16384

// Slot returns the Redis Cluster hash slot of a key: CRC16 (XMODEM) of its
// hash tag (the part between the first '{' and the next '}', when not empty),
// or of the whole key, modulo 16384. Keys with the same slot can be used
// together in one script call on a cluster.
func Slot(key []byte) uint16 {
	for i, c := range key {
		if c != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j > i+1 {
					key = key[i+1 : j]
				}
				return crc16(key) % Slots
			}
		}
		break
	}
	return crc16(key) % Slots
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), as Redis Cluster uses.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for i := 0; i < 8; i++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// AppendSlotTag appends to dst a hash tag of the slot: four characters
// from '@' to 'O' whose CRC16 puts a key braced around them ("{" tag "}")
// in that slot. A key of one slot that a script writes, and that others
// find knowing only the slot, is named with it (see Unlisted).
//
// CRC16 with an initial 0 is linear: for strings of one length,
// crc16(a XOR b) = crc16(a) XOR crc16(b). A tag is "@@@@" XOR four
// nibbles, so its CRC is crc16("@@@@") XOR a linear function of the 16
// bits of the nibbles, which slotBasis inverts on the slot's 14 bits.
func AppendSlotTag(dst []byte, slot uint16) []byte {
	target := (slot ^ zeroTagCRC) % Slots
	var v uint16
	for bit := 13; bit >= 0; bit-- {
		if target>>bit&1 != 0 {
			target ^= slotBasis[bit].slot
			v ^= slotBasis[bit].nibbles
		}
	}
	return appendTag(dst, v)
}

// appendTag appends the tag of 16 bits: four characters, '@' (0x40) OR a
// nibble each.
func appendTag(dst []byte, v uint16) []byte {
	return append(dst, 0x40|byte(v>>12), 0x40|byte(v>>8&15), 0x40|byte(v>>4&15), 0x40|byte(v&15))
}

// zeroTagCRC is the CRC16 of the tag of 0, "@@@@".
var zeroTagCRC = crc16(appendTag(nil, 0))

// slotBasis[b] is nibbles whose CRC16 moves a tag's slot by bits whose
// highest is b: Gaussian elimination, over GF(2), of what each of the 16
// bits of a tag does to its slot. Every slot has a tag (the tests check
// all 16384): the 16 bits span the slot's 14.
var slotBasis = func() (basis [14]struct{ slot, nibbles uint16 }) {
	zero := crc16(appendTag(nil, 0))
	for b := range 16 {
		slot, nibbles := (crc16(appendTag(nil, 1<<b))^zero)%Slots, uint16(1)<<b
		for bit := 13; bit >= 0 && slot != 0; bit-- {
			if slot>>bit&1 == 0 {
				continue
			}
			if basis[bit].slot == 0 {
				basis[bit].slot, basis[bit].nibbles = slot, nibbles
				break
			}
			slot ^= basis[bit].slot
			nibbles ^= basis[bit].nibbles
		}
	}
	return basis
}()
